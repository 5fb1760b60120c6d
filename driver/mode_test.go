package driver

import (
	"encoding/json"
	"strings"
	"testing"
)

// Modes encode as their names, in JSON among others, and decode back.
func TestModeText(t *testing.T) {
	for _, m := range []Mode{Exclusive, Shared} {
		b, err := json.Marshal(Info{Mode: m})
		if err != nil {
			t.Fatal(err)
		}
		var back Info
		if err := json.Unmarshal(b, &back); err != nil || back.Mode != m {
			t.Errorf("%s: %s decodes to %v, %v", m, b, back.Mode, err)
		}
		if want := `"mode":"` + m.String() + `"`; !json.Valid(b) || !strings.Contains(string(b), want) {
			t.Errorf("%s: %s lacks %s", m, b, want)
		}
	}
	var m Mode
	if err := m.UnmarshalText([]byte("0")); err == nil {
		t.Errorf(`UnmarshalText("0"): no error`)
	}
}
