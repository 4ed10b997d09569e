package main

import (
	"testing"

	"golang.org/x/mod/module"
)

func TestCheck(t *testing.T) {
	mco := map[string]string{
		"example.com/a": "v1.2.0",
		"example.com/b": "v0.0.0-20260101000000-abcdefabcdef",
		"example.com/c": "v1.0.0",
	}
	allowed := map[string]string{"example.com/allowed": "needs a newer API"}
	for _, tc := range []struct {
		name string
		req  module.Version
		bad  bool
	}{
		{"older", module.Version{Path: "example.com/a", Version: "v1.1.9"}, false},
		{"same", module.Version{Path: "example.com/a", Version: "v1.2.0"}, false},
		{"newer", module.Version{Path: "example.com/a", Version: "v1.3.0"}, true},
		{"newer pseudo-version than theirs", module.Version{Path: "example.com/b", Version: "v0.0.0-20260201000000-abcdefabcdef"}, true},
		{"older pseudo-version than theirs", module.Version{Path: "example.com/b", Version: "v0.0.0-20251201000000-abcdefabcdef"}, false},
		{"pseudo-version where they take a release", module.Version{Path: "example.com/c", Version: "v0.9.1-0.20250101000000-abcdefabcdef"}, true},
		{"a module the MCO lacks", module.Version{Path: "example.com/new", Version: "v9.0.0"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Check([]module.Version{tc.req}, mco, allowed)
			if (len(got) > 0) != tc.bad {
				t.Errorf("Check(%v) = %q, want a problem: %v", tc.req, got, tc.bad)
			}
		})
	}
	if got := Check([]module.Version{{Path: "example.com/allowed", Version: "v2.0.0"}}, map[string]string{"example.com/allowed": "v1.0.0"}, allowed); len(got) > 0 {
		t.Errorf("an allowed module is reported: %q", got)
	}
}
