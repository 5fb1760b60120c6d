package redis

import (
	"crypto/sha1"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"
)

// Every file in lua/ is embedded and is a script's (or the prelude), each
// script is built from its file, and each file can be read alone: it has a
// header, and a script's header names its KEYS and its reply. No server:
// the tests against Redis run the scripts themselves.
func TestLuaFiles(t *testing.T) {
	scripts := map[string]*goredis.Script{ // lua/NAME.lua → the script
		"acquire":  acquireScript,
		"fence":    fenceScript,
		"extend":   extendScript,
		"release":  releaseScript,
		"transfer": transferScript,
		"leave":    leaveScript,
		"inspect":  inspectScript,
	}
	paths, err := filepath.Glob("lua/*.lua")
	if err != nil {
		t.Fatal(err)
	}
	var names, want []string
	for _, p := range paths {
		names = append(names, strings.TrimSuffix(filepath.Base(p), ".lua"))
	}
	for name := range scripts {
		want = append(want, name)
	}
	// The prelude, and RedLock's two snippets, which are sent in front of
	// acquire.lua and release.lua rather than alone (checked below).
	want = append(want, "prelude", "redlock_ticket", "redlock_requeue", "anyacquire")
	slices.Sort(names)
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Fatalf("lua/ holds %v, want %v: a file per script in scripts.go, and the prelude", names, want)
	}
	for _, name := range names {
		path := "lua/" + name + ".lua"
		onDisk, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		embedded, err := luaFiles.ReadFile(path)
		if err != nil {
			t.Errorf("%s is not embedded: %v", path, err)
			continue
		}
		if string(embedded) != string(onDisk) {
			t.Errorf("%s: the embedded file is not the one on disk", path)
		}
		body := luaScript(name)
		header := strings.TrimSuffix(string(embedded), body)
		if header == "" {
			t.Errorf("%s has no header: it starts with no comment", path)
		}
		if strings.TrimSpace(body) == "" {
			t.Errorf("%s has no code after its header", path)
		}
		if name == "anyacquire" {
			for _, w := range []string{"KEYS[3i-2]", "Reply:"} {
				if !strings.Contains(header, w) {
					t.Errorf("%s: its header does not say %q", path, w)
				}
			}
		}
		s, ok := scripts[name]
		if !ok {
			continue // the prelude, a RedLock snippet, or anyacquire (below)
		}
		for _, w := range []string{"KEYS[1]", "Reply:"} {
			if !strings.Contains(header, w) {
				t.Errorf("%s: its header does not say %q", path, w)
			}
		}
		if name != "leave" { // the one script without the prelude
			body = prelude + body
		}
		if sum := sha1.Sum([]byte(body)); s.Hash() != hex.EncodeToString(sum[:]) {
			t.Errorf("%sScript is not built from %s", name, path)
		}
	}
	// anyacquire.lua runs after acquire.lua's body, made a function that
	// takes one request's KEYS and ARGV.
	body := prelude + "local function acquireOne(KEYS, ARGV)\n" + luaScript("acquire") + "\nend\n" + luaScript("anyacquire")
	if sum := sha1.Sum([]byte(body)); anyAcquireScript.Hash() != hex.EncodeToString(sum[:]) {
		t.Error("anyAcquireScript is not built from lua/acquire.lua and lua/anyacquire.lua")
	}
	// RedLock's snippets run between the prelude and the script they
	// precede, as one script.
	for s, parts := range map[*goredis.Script][]string{
		rlAcquireScript: {"redlock_ticket", "acquire"},
		rlRequeueScript: {"redlock_requeue", "release"},
	} {
		body := prelude + luaScript(parts[0]) + luaScript(parts[1])
		if sum := sha1.Sum([]byte(body)); s.Hash() != hex.EncodeToString(sum[:]) {
			t.Errorf("the RedLock script of %s is not built from lua/%s.lua and lua/%s.lua", parts[1], parts[0], parts[1])
		}
	}
}
