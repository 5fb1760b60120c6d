package dlock_test

import "github.com/dlock-go/dlock/driver"

// plainDriver hides a driver's capabilities: it declares none.
type plainDriver struct{ driver.Driver }

func (plainDriver) Capabilities() driver.Capabilities { return driver.Capabilities{} }
