package dlock_test

import "github.com/dlock-go/dlock/driver"

// plainDriver hides a driver's optional capabilities.
type plainDriver struct{ driver.Driver }
