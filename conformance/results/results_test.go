package results

import (
	"strings"
	"testing"
)

func TestMarshalRoundTrip(t *testing.T) {
	b := Backend{Name: "redis/RedLock", Package: "example.com/redis", Capabilities: Capabilities{Shared: true, TokenBlock: 16, MinTTL: "0s", MaxTTL: "0s"},
		Cases: []Case{{Name: "A", Outcome: Passed}, {Name: "B", Outcome: Skipped, Reason: "no hook"}}}
	data, err := Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Unmarshal(data)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := Marshal(got); string(again) != string(data) {
		t.Errorf("a record read back marshals differently:\n%s\nwant:\n%s", again, data)
	}
	for name, edited := range map[string]string{
		"reindented":    strings.Replace(string(data), "  ", "\t", 1),
		"unknown field": strings.Replace(string(data), "{\n", "{\n  \"speed\": 1,\n", 1),
		"trailing data": string(data) + "{}\n",
		"no newline":    strings.TrimSuffix(string(data), "\n"),
	} {
		if _, err := Unmarshal([]byte(edited)); err == nil {
			t.Errorf("%s: Unmarshal accepted it", name)
		}
	}
}

func TestNames(t *testing.T) {
	for _, name := range []string{"redis", "redis/RedLock", "memory/Token_Blocks-2", "my.driver/v2"} {
		if err := CheckName(name); err != nil {
			t.Errorf("CheckName(%q): %v", name, err)
		}
	}
	for _, name := range []string{"", "/redis", "redis/", "a//b", "../x", ".hidden", "a b", "a\\b", "é"} {
		if err := CheckName(name); err == nil {
			t.Errorf("CheckName(%q) accepted it", name)
		}
		if _, err := Marshal(Backend{Name: name}); err == nil {
			t.Errorf("Marshal with the name %q accepted it", name)
		}
	}
	if got := FileName("redis/RedLock"); got != "redis.RedLock.json" {
		t.Errorf("FileName = %q", got)
	}
}
