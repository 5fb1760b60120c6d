package redis

import (
	goredis "github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock/internal/liblog"
)

// go-redis has one logger for the whole process, which writes to stderr: a
// refused connection prints its pool's complaints before dlock's error
// reaches the caller. Importing this package sends them to slog at Debug
// instead (see package liblog); a program that wants them elsewhere calls
// goredis.SetLogger after its imports are initialised.
func init() {
	goredis.SetLogger(liblog.PrintfContext("go-redis"))
}
