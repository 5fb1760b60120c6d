// Package config loads dlock's configuration: a YAML file naming one or more
// backends with their URLs and lock defaults, overridable by environment
// variables. Applications, the dlock command and the tests read the same
// file through Load.
//
//	# dlock.yaml
//	default: main
//	backends:
//	  main:
//	    url: redis://localhost:6379/0
//	    ttl: 30s        # lease length (dlock.WithTTL); default 15s
//	    renewal: true   # automatic renewal (default true)
//	    wait: 5m        # how long `dlock run` waits for the lock; 0 = forever
//	  zk:
//	    url: zk://zk1:2181,zk2:2181,zk3:2181/locks
//
// Environment variables override the file:
//   - DLOCK_CONFIG: the file to read when Load is given no path;
//   - DLOCK_BACKEND: which backend Select returns when given no name;
//   - DLOCK_URL: the URL of the selected backend (with no file, it defines
//     the one backend, named "env");
//   - DLOCK_TTL, DLOCK_WAIT, DLOCK_RENEWAL: that backend's defaults.
//
// Every error names the file (or variable), the field and what is wrong, and
// satisfies errors.Is(err, ErrInvalid).
package config

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/dlock-go/dlock"
)

// ErrInvalid is wrapped by every error about the configuration's content.
var ErrInvalid = errors.New("dlock: invalid configuration")

// Error is a problem with one field of the configuration.
type Error struct {
	Source  string // the file, or the environment variable
	Line    int    // in the file; 0 when unknown
	Field   string // e.g. "backends.main.ttl"
	Problem string
}

// Error says where the problem is (source, line, field) and what it is.
func (e *Error) Error() string {
	where := e.Source
	if e.Line > 0 {
		where += ":" + strconv.Itoa(e.Line)
	}
	if e.Field == "" {
		return fmt.Sprintf("%s: %s", where, e.Problem)
	}
	return fmt.Sprintf("%s: %s: %s", where, e.Field, e.Problem)
}

// Unwrap makes errors.Is(err, ErrInvalid) true.
func (e *Error) Unwrap() error { return ErrInvalid }

// Config is a loaded configuration.
type Config struct {
	// Path is the file read, or "" when there was none.
	Path string
	// Default names the backend Select returns when given no name.
	Default string
	// Backends by name.
	Backends map[string]Backend
}

// Backend is one backend and the defaults of the locks taken on it.
type Backend struct {
	Name    string
	URL     string
	TTL     time.Duration // 0: dlock's default
	Renewal bool          // automatic renewal
	Wait    time.Duration // 0: wait as long as it takes
}

// Options returns the dlock options the backend's defaults stand for.
func (b Backend) Options() []dlock.Option {
	var opts []dlock.Option
	if b.TTL > 0 {
		opts = append(opts, dlock.WithTTL(b.TTL))
	}
	if !b.Renewal {
		opts = append(opts, dlock.WithoutRenewal())
	}
	return opts
}

// Open opens a client of the backend with its defaults (the driver for its
// URL scheme must be imported), plus opts.
func (b Backend) Open(ctx context.Context, opts ...dlock.Option) (*dlock.Client, error) {
	return dlock.Open(ctx, b.URL, append(b.Options(), opts...)...)
}

// file is the YAML shape.
type file struct {
	Default  string                  `yaml:"default"`
	Backends map[string]*fileBackend `yaml:"backends"`
}

type fileBackend struct {
	URL     string `yaml:"url"`
	TTL     string `yaml:"ttl"`
	Renewal *bool  `yaml:"renewal"`
	Wait    string `yaml:"wait"`
}

// fieldAt maps a backend's field names to their lines; "" is the backend's.
type fieldAt map[string]int

// Load reads the configuration from path, or from $DLOCK_CONFIG when path is
// empty, or none when both are; then applies the environment's overrides.
func Load(path string) (*Config, error) {
	if path == "" {
		path = os.Getenv("DLOCK_CONFIG")
	}
	c := &Config{Path: path, Backends: map[string]Backend{}}
	if path != "" {
		if err := c.read(path); err != nil {
			return nil, err
		}
	}
	if err := c.applyEnv(); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Config) read(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("dlock config: %w", err)
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return &Error{Source: path, Problem: "not valid YAML: " + strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	var f file
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) { // EOF: an empty file
		return &Error{Source: path, Problem: strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	lines := backendLines(&root)
	c.Default = f.Default
	for name, fb := range f.Backends {
		field := "backends." + name
		at := lines[name]
		if fb == nil {
			return &Error{Source: path, Line: at[""], Field: field, Problem: "empty; want at least url"}
		}
		b, err := fb.backend(name)
		if err != nil {
			err.Source, err.Line = path, at[err.Field]
			err.Field = field + "." + err.Field
			return err
		}
		c.Backends[name] = b
	}
	if c.Default != "" {
		if _, ok := c.Backends[c.Default]; !ok {
			return &Error{Source: path, Field: "default", Problem: fmt.Sprintf("names backend %q, which is not under backends (have: %s)", c.Default, strings.Join(c.names(), ", "))}
		}
	}
	return nil
}

// backendLines finds the line of each backend and of each of its fields.
func backendLines(root *yaml.Node) map[string]fieldAt {
	lines := map[string]fieldAt{}
	if len(root.Content) == 0 {
		return lines
	}
	doc := root.Content[0]
	for i := 0; i+1 < len(doc.Content); i += 2 {
		if doc.Content[i].Value != "backends" {
			continue
		}
		bs := doc.Content[i+1]
		for j := 0; j+1 < len(bs.Content); j += 2 {
			at := fieldAt{"": bs.Content[j].Line}
			fields := bs.Content[j+1]
			for k := 0; k+1 < len(fields.Content); k += 2 {
				at[fields.Content[k].Value] = fields.Content[k].Line
			}
			lines[bs.Content[j].Value] = at
		}
	}
	return lines
}

// backend checks one entry of the file.
func (fb *fileBackend) backend(name string) (Backend, *Error) {
	b := Backend{Name: name, Renewal: fb.Renewal == nil || *fb.Renewal}
	var err *Error
	if b.URL, err = checkURL(fb.URL); err != nil {
		return b, err
	}
	if b.TTL, err = parseDuration("ttl", fb.TTL, dlock.ValidateTTL); err != nil {
		return b, err
	}
	if b.Wait, err = parseDuration("wait", fb.Wait, nil); err != nil {
		return b, err
	}
	return b, nil
}

func checkURL(raw string) (string, *Error) {
	if raw == "" {
		return "", &Error{Field: "url", Problem: "missing; want a backend URL such as redis://localhost:6379/0"}
	}
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" || u.Opaque != "" { // "host:port" parses as scheme "host"
		return "", &Error{Field: "url", Problem: fmt.Sprintf("not a URL with a scheme such as redis://host:6379/0 (registered: %s)", strings.Join(dlock.Schemes(), ", "))}
	}
	return raw, nil
}

func parseDuration(field, raw string, check func(time.Duration) error) (time.Duration, *Error) {
	if raw == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(raw)
	if err != nil || d < 0 {
		return 0, &Error{Field: field, Problem: fmt.Sprintf("want a duration such as 30s, got %q", raw)}
	}
	if check != nil && d != 0 {
		if err := check(d); err != nil {
			return 0, &Error{Field: field, Problem: err.Error()}
		}
	}
	return d, nil
}

// applyEnv applies DLOCK_URL, DLOCK_TTL, DLOCK_WAIT and DLOCK_RENEWAL to
// the backend DLOCK_BACKEND (or the default) selects.
func (c *Config) applyEnv() error {
	name := os.Getenv("DLOCK_BACKEND")
	if rawURL := os.Getenv("DLOCK_URL"); rawURL != "" {
		u, err := checkURL(rawURL)
		if err != nil {
			err.Source, err.Field = "DLOCK_URL", ""
			return err
		}
		if name == "" {
			name = c.Default
		}
		if name == "" && len(c.Backends) == 0 {
			name = "env"
		}
		if name == "" {
			return &Error{Source: "DLOCK_URL", Problem: "several backends are configured and none is the default; set DLOCK_BACKEND"}
		}
		b, ok := c.Backends[name]
		if !ok {
			b = Backend{Name: name, Renewal: true}
		}
		b.URL = u
		c.Backends[name] = b
		if c.Default == "" {
			c.Default = name
		}
	}
	if name == "" {
		name = c.Default
	}
	b, ok := c.Backends[name]
	if !ok {
		if name != "" && os.Getenv("DLOCK_BACKEND") != "" {
			return &Error{Source: "DLOCK_BACKEND", Problem: fmt.Sprintf("no backend %q (have: %s)", name, strings.Join(c.names(), ", "))}
		}
		return nil
	}
	var err *Error
	if v := os.Getenv("DLOCK_TTL"); v != "" {
		if b.TTL, err = parseDuration("ttl", v, dlock.ValidateTTL); err != nil {
			err.Source, err.Field = "DLOCK_TTL", ""
			return err
		}
	}
	if v := os.Getenv("DLOCK_WAIT"); v != "" {
		if b.Wait, err = parseDuration("wait", v, nil); err != nil {
			err.Source, err.Field = "DLOCK_WAIT", ""
			return err
		}
	}
	if v := os.Getenv("DLOCK_RENEWAL"); v != "" {
		on, perr := strconv.ParseBool(v)
		if perr != nil {
			return &Error{Source: "DLOCK_RENEWAL", Problem: fmt.Sprintf("want true or false, got %q", v)}
		}
		b.Renewal = on
	}
	c.Backends[name] = b
	return nil
}

// Select returns the backend called name; with an empty name, the one
// DLOCK_BACKEND names, else the default, else the only one configured.
func (c *Config) Select(name string) (Backend, error) {
	source := "backend name"
	if name == "" {
		name, source = os.Getenv("DLOCK_BACKEND"), "DLOCK_BACKEND"
	}
	if name == "" {
		name, source = c.Default, c.source()
	}
	if name == "" && len(c.Backends) == 1 {
		for n := range c.Backends {
			name = n
		}
	}
	if name == "" {
		if len(c.Backends) == 0 {
			return Backend{}, &Error{Source: c.source(), Problem: "no backend configured: give a URL (--url or DLOCK_URL) or a config file with backends"}
		}
		return Backend{}, &Error{Source: c.source(), Field: "default", Problem: fmt.Sprintf("several backends (%s) and no default: name one", strings.Join(c.names(), ", "))}
	}
	b, ok := c.Backends[name]
	if !ok {
		return Backend{}, &Error{Source: source, Problem: fmt.Sprintf("no backend %q (have: %s)", name, strings.Join(c.names(), ", "))}
	}
	return b, nil
}

func (c *Config) source() string {
	if c.Path == "" {
		return "environment"
	}
	return c.Path
}

func (c *Config) names() []string {
	names := make([]string, 0, len(c.Backends))
	for n := range c.Backends {
		names = append(names, n)
	}
	slices.Sort(names)
	if len(names) == 0 {
		return []string{"none"}
	}
	return names
}
