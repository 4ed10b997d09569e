// Package fuzzed turns fuzzed bytes into what the refresh fuzz tests decide on; only tests use it.
package fuzzed

import "github.com/bootimage-operator/bootimage-operator/refresh"

// Changes parses two fuzzed configs and returns the new one and what changed from the old; ok is
// false where either does not parse or they do not diff, inputs a fuzz test passes over.
func Changes(oldRaw, newRaw []byte) (newCfg refresh.Config, changes []refresh.Change, ok bool) {
	oldCfg, err := refresh.Parse(oldRaw)
	if err != nil {
		return refresh.Config{}, nil, false
	}
	newCfg, err = refresh.Parse(newRaw)
	if err != nil {
		return refresh.Config{}, nil, false
	}
	changes, err = refresh.Diff(oldCfg, newCfg)
	if err != nil {
		return refresh.Config{}, nil, false
	}
	return newCfg, changes, true
}
