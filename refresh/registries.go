package refresh

import (
	"bytes"
	"fmt"
	"reflect"
	"slices"
	"sort"

	"github.com/BurntSushi/toml"
)

// mirrorByDigestOnly is the pull-from-mirror value that only pulls by digest through a mirror.
const mirrorByDigestOnly = "digest-only"

// registriesConf is the part of containers-registries.conf(5) v2 whose changes decide a drain.
type registriesConf struct {
	UnqualifiedSearchRegistries []string   `toml:"unqualified-search-registries"`
	Registries                  []registry `toml:"registry"`
}

type registry struct {
	Prefix             string   `toml:"prefix"`
	Location           string   `toml:"location"`
	Insecure           bool     `toml:"insecure"`
	Blocked            bool     `toml:"blocked"`
	MirrorByDigestOnly bool     `toml:"mirror-by-digest-only"`
	Mirrors            []mirror `toml:"mirror"`
}

type mirror struct {
	Location       string `toml:"location"`
	Insecure       bool   `toml:"insecure"`
	PullFromMirror string `toml:"pull-from-mirror"`
}

// scope is what a registry entry applies to: its prefix, else its location.
func (r registry) scope() string {
	if r.Prefix != "" {
		return r.Prefix
	}
	return r.Location
}

// allDigestOnly reports whether every pull through r's mirrors is by digest.
func (r registry) allDigestOnly() bool {
	if len(r.Mirrors) == 0 {
		return r.MirrorByDigestOnly
	}
	return !slices.ContainsFunc(r.Mirrors, func(m mirror) bool { return m.PullFromMirror != mirrorByDigestOnly })
}

func findMirror(mirrors []mirror, location string) (mirror, bool) {
	i := slices.IndexFunc(mirrors, func(m mirror) bool { return m.Location == location })
	if i < 0 {
		return mirror{}, false
	}
	return mirrors[i], true
}

// registriesNeedDrain reads two versions of registries.conf (an absent file is empty) and says
// whether crio's reload must be preceded by a drain, with the reason; the rules are the MCO's
// isSafeContainerRegistryConfChanges. Contents that do not parse are an error, as in the MCO.
func registriesNeedDrain(oldRaw, newRaw []byte) (drain bool, why string, err error) {
	if bytes.Equal(oldRaw, newRaw) {
		return false, "contents unchanged", nil
	}
	var old, new registriesConf
	if _, err := toml.Decode(string(oldRaw), &old); err != nil {
		return false, "", fmt.Errorf("the current %s is not valid TOML: %v", RegistriesConf, err)
	}
	if _, err := toml.Decode(string(newRaw), &new); err != nil {
		return false, "", fmt.Errorf("the new %s is not valid TOML: %v", RegistriesConf, err)
	}
	if why := unsafeRegistriesChange(old, new); why != "" {
		return true, why, nil
	}
	return false, "only safe registry changes", nil
}

// unsafeRegistriesChange names the first change that running pods could notice, or returns "".
// Safe: search registries appended; mirrors added with pull-from-mirror = "digest-only" (or to a
// registry with mirror-by-digest-only); registries added whose mirrors are all digest-only; a
// pull-from-mirror changed to "digest-only"; anything these rules do not look at.
func unsafeRegistriesChange(old, new registriesConf) string {
	if len(old.UnqualifiedSearchRegistries) > len(new.UnqualifiedSearchRegistries) ||
		!slices.Equal(old.UnqualifiedSearchRegistries, new.UnqualifiedSearchRegistries[:len(old.UnqualifiedSearchRegistries)]) {
		return "unqualified-search-registries lost an entry or changed order"
	}
	oldByScope, newByScope := byScope(old.Registries), byScope(new.Registries)
	for _, scope := range sortedKeys(oldByScope) {
		if _, ok := newByScope[scope]; !ok {
			return fmt.Sprintf("registry %s removed", scope)
		}
	}
	for _, scope := range sortedKeys(newByScope) {
		n := newByScope[scope]
		o, existed := oldByScope[scope]
		if !existed {
			if !n.allDigestOnly() {
				return fmt.Sprintf("registry %s added with mirrors that are not digest-only", scope)
			}
			continue
		}
		// An unchanged entry is safe even where the checks below would misread it (two mirrors
		// of one location).
		if reflect.DeepEqual(o, n) {
			continue
		}
		switch {
		case o.Prefix != n.Prefix:
			return fmt.Sprintf("registry %s: prefix changed", scope)
		case o.Location != n.Location:
			return fmt.Sprintf("registry %s: location changed", scope)
		case o.Blocked != n.Blocked:
			return fmt.Sprintf("registry %s: blocked changed", scope)
		case o.Insecure != n.Insecure:
			return fmt.Sprintf("registry %s: insecure changed", scope)
		}
		for _, m := range o.Mirrors {
			if _, ok := findMirror(n.Mirrors, m.Location); !ok {
				return fmt.Sprintf("registry %s: mirror %s removed", scope, m.Location)
			}
		}
		for _, m := range n.Mirrors {
			was, ok := findMirror(o.Mirrors, m.Location)
			switch {
			case ok && m.PullFromMirror != was.PullFromMirror && m.PullFromMirror != mirrorByDigestOnly:
				return fmt.Sprintf("registry %s: mirror %s pull-from-mirror changed to %q", scope, m.Location, m.PullFromMirror)
			case !ok && m.PullFromMirror != mirrorByDigestOnly && !n.MirrorByDigestOnly:
				return fmt.Sprintf("registry %s: mirror %s added without pull-from-mirror = %q", scope, m.Location, mirrorByDigestOnly)
			}
		}
	}
	return ""
}

// byScope indexes registries by scope; a later entry of the same scope wins, as in the MCO.
func byScope(rs []registry) map[string]registry {
	m := make(map[string]registry, len(rs))
	for _, r := range rs {
		m[r.scope()] = r
	}
	return m
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
