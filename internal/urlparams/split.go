package urlparams

import (
	"net/url"
	"time"
)

// SplitConnectTimeout returns a copy of u without its connect_timeout
// parameter, and the parameter's value (0 when u has none), for code that
// connects without [Connect], such as the doctor's checks: a bad value is
// an error wrapping dlock.ErrInvalidURL.
func SplitConnectTimeout(u *url.URL) (*url.URL, time.Duration, error) {
	return takeConnectTimeout(u)
}
