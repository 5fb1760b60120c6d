package postgres

import (
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/driveropt"
)

// Defaults of the options.
const (
	// DefaultMaxConns is how many connections a Driver keeps open at most,
	// unless [WithMaxConns] says otherwise.
	DefaultMaxConns = 64
	// DefaultMaxIdleTime is how long an idle connection is kept for reuse,
	// unless [WithMaxIdleTime] says otherwise.
	DefaultMaxIdleTime = 5 * time.Minute
	// DefaultSchema is the schema of the driver's sequence and table,
	// unless [WithSchema] says otherwise.
	DefaultSchema = "public"
)

// Option configures a Driver. An Option returns an error wrapping
// dlock.ErrInvalidOption when given a value it does not accept.
type Option func(*options) error

type options struct {
	maxConns    int
	maxIdleTime time.Duration
	schema      string
}

func defaultOptions() options {
	return options{maxConns: DefaultMaxConns, maxIdleTime: DefaultMaxIdleTime, schema: DefaultSchema}
}

// with returns o with opts applied, in order.
func (o options) with(opts []Option) (options, error) {
	err := driveropt.Apply(&o, opts)
	return o, err
}

// WithMaxConns bounds the connections the Driver has open at once. Every
// held lock and every Lock call waiting in PostgreSQL's queue uses one
// connection of its own (see "Connections" in the package documentation).
// A Lock that finds all n in use waits for one to be given back, for as long
// as its context allows; a TryLock fails at once with an error wrapping
// [ErrConnLimit]. n must be at least 1. Default: [DefaultMaxConns] (64).
func WithMaxConns(n int) Option {
	return func(o *options) error {
		if n < 1 {
			return fmt.Errorf("%w: postgres: max connections must be at least 1, got %d", dlock.ErrInvalidOption, n)
		}
		o.maxConns = n
		return nil
	}
}

// WithMaxIdleTime sets how long a connection that holds no lock is kept for
// the next acquisition before the Driver closes it (checked when a
// connection is next needed, so an idle Driver keeps its connections until
// then or Close). d must be positive. Default: [DefaultMaxIdleTime] (5 min).
func WithMaxIdleTime(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("%w: postgres: max idle time must be positive, got %v", dlock.ErrInvalidOption, d)
		}
		o.maxIdleTime = d
		return nil
	}
}

// WithSchema sets the schema that holds the driver's sequence dlock_fence and
// tables dlock_owner_groups and dlock_values (see "Migration" in the package
// documentation). Drivers contend for the same locks whatever their schema
// (advisory locks belong to the database), but their fencing tokens, owner
// groups and values come from their own schema's objects: let every client
// of one database use the same schema. Default: [DefaultSchema] ("public").
func WithSchema(schema string) Option {
	return func(o *options) error {
		if schema == "" {
			return fmt.Errorf("%w: postgres: empty schema name", dlock.ErrInvalidOption)
		}
		o.schema = schema
		return nil
	}
}

// qualified returns the quoted, schema-qualified name of one of the driver's
// objects.
func (o options) qualified(name string) string {
	return pgx.Identifier{o.schema, name}.Sanitize()
}
