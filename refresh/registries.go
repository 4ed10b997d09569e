package refresh

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"reflect"
	"runtime"
	"slices"
	"sort"

	"github.com/BurntSushi/toml"
	"github.com/containers/image/v5/pkg/sysregistriesv2"
	"github.com/containers/image/v5/types"
)

// registriesNeedDrain reads two versions of registries.conf (an absent file is empty) and says
// whether crio's reload must be preceded by a drain, with the reason. The rules are the MCO's
// isSafeContainerRegistryConfChanges on the containers library's own types, plus the changes it
// lets through although running pods would notice them (unsafeBeyondMCO). Contents that do not
// decode are an error, as in the MCO.
func registriesNeedDrain(oldRaw, newRaw []byte) (drain bool, why string, err error) {
	if bytes.Equal(oldRaw, newRaw) {
		return false, "contents unchanged", nil
	}
	var old, new sysregistriesv2.V2RegistriesConf
	if _, err := toml.Decode(string(oldRaw), &old); err != nil {
		return false, "", currentUnreadable{err}
	}
	if _, err := toml.Decode(string(newRaw), &new); err != nil {
		return false, "", fmt.Errorf("the new %s cannot be read: %v", registriesConf, err)
	}
	if why := unsafeRegistriesChange(old, new); why != "" {
		return true, why, nil
	}
	return false, "only safe registry changes", nil
}

// currentUnreadable is the error of a current registries.conf that does not decode.
type currentUnreadable struct{ err error }

func (e currentUnreadable) Error() string {
	return fmt.Sprintf("the current %s cannot be read: %v", registriesConf, e.err)
}

// checkRegistriesLoad loads contents the way crio does (sysregistriesv2: the TOML schema, then
// the library's checks of locations, prefixes, mirrors, pull-from-mirror, search registries,
// short-name mode and aliases) and returns why crio would refuse them, nil when it would not.
// The library reads only files: the contents reach it through a pipe, so nothing is written to
// disk.
func checkRegistriesLoad(contents []byte) error {
	path, done, err := registriesSource(contents)
	if err != nil {
		return fmt.Errorf("checking %s: %v", registriesConf, err)
	}
	defer done()
	// The drop-in directory is the file itself: not a directory, so no drop-ins are read.
	_, err = sysregistriesv2.TryUpdatingCache(&types.SystemContext{SystemRegistriesConfPath: path, SystemRegistriesConfDirPath: path})
	if err == nil {
		return nil
	}
	// Drop the library's wrapping, which names the pipe rather than the file.
	if inner := errors.Unwrap(err); inner != nil {
		err = inner
	}
	return fmt.Errorf("the new %s cannot be loaded by crio: %v", registriesConf, err)
}

// registriesSource returns a path the containers library can read contents from: a pipe (Windows
// has no /dev/fd: a temporary file there), and what to call once it is read.
func registriesSource(contents []byte) (string, func(), error) {
	if runtime.GOOS == "windows" {
		f, err := os.CreateTemp("", "registries-*.conf")
		if err != nil {
			return "", nil, err
		}
		_, werr := f.Write(contents)
		if err := errors.Join(werr, f.Close()); err != nil {
			_ = os.Remove(f.Name())
			return "", nil, err
		}
		return f.Name(), func() { _ = os.Remove(f.Name()) }, nil
	}
	r, w, err := os.Pipe()
	if err != nil {
		return "", nil, err
	}
	go func() {
		// Closing r unblocks this write if the library stopped reading early.
		_, _ = w.Write(contents)
		_ = w.Close()
	}()
	return fmt.Sprintf("/dev/fd/%d", r.Fd()), func() { _ = r.Close() }, nil
}

// scope is what a registry entry applies to: its prefix, else its location.
func scope(r sysregistriesv2.Registry) string {
	if r.Prefix != "" {
		return r.Prefix
	}
	return r.Location
}

// allDigestOnly reports whether every pull through r's mirrors is by digest.
func allDigestOnly(r sysregistriesv2.Registry) bool {
	if len(r.Mirrors) == 0 {
		return r.MirrorByDigestOnly
	}
	return !slices.ContainsFunc(r.Mirrors, func(m sysregistriesv2.Endpoint) bool { return m.PullFromMirror != sysregistriesv2.MirrorByDigestOnly })
}

// pullsThrough is which pulls go through mirror m of r: the registry's mirror-by-digest-only, else
// the mirror's pull-from-mirror ("" is all).
func pullsThrough(r sysregistriesv2.Registry, m sysregistriesv2.Endpoint) string {
	switch {
	case r.MirrorByDigestOnly:
		return sysregistriesv2.MirrorByDigestOnly
	case m.PullFromMirror == "":
		return sysregistriesv2.MirrorAll
	}
	return m.PullFromMirror
}

func findMirror(mirrors []sysregistriesv2.Endpoint, location string) (sysregistriesv2.Endpoint, bool) {
	i := slices.IndexFunc(mirrors, func(m sysregistriesv2.Endpoint) bool { return m.Location == location })
	if i < 0 {
		return sysregistriesv2.Endpoint{}, false
	}
	return mirrors[i], true
}

// unsafeRegistriesChange names the first change that running pods could notice, or returns "".
// Safe: search registries appended; mirrors added with pull-from-mirror = "digest-only" (or to a
// registry with mirror-by-digest-only); registries added whose mirrors are all digest-only; a
// pull-from-mirror changed to "digest-only"; anything these rules do not look at.
func unsafeRegistriesChange(old, new sysregistriesv2.V2RegistriesConf) string {
	if len(old.UnqualifiedSearchRegistries) > len(new.UnqualifiedSearchRegistries) ||
		!slices.Equal(old.UnqualifiedSearchRegistries, new.UnqualifiedSearchRegistries[:len(old.UnqualifiedSearchRegistries)]) {
		return "unqualified-search-registries lost an entry or changed order"
	}
	oldByScope, newByScope := byScope(old.Registries), byScope(new.Registries)
	for _, s := range sortedKeys(oldByScope) {
		if _, ok := newByScope[s]; !ok {
			return fmt.Sprintf("registry %s removed", s)
		}
	}
	for _, s := range sortedKeys(newByScope) {
		n := newByScope[s]
		o, existed := oldByScope[s]
		if !existed {
			if !allDigestOnly(n) {
				return fmt.Sprintf("registry %s added with mirrors that are not digest-only", s)
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
			return fmt.Sprintf("registry %s: prefix changed", s)
		case o.Location != n.Location:
			return fmt.Sprintf("registry %s: location changed", s)
		case o.Blocked != n.Blocked:
			return fmt.Sprintf("registry %s: blocked changed", s)
		case o.Insecure != n.Insecure:
			return fmt.Sprintf("registry %s: insecure changed", s)
		}
		for _, m := range o.Mirrors {
			if _, ok := findMirror(n.Mirrors, m.Location); !ok {
				return fmt.Sprintf("registry %s: mirror %s removed", s, m.Location)
			}
		}
		for _, m := range n.Mirrors {
			was, ok := findMirror(o.Mirrors, m.Location)
			switch {
			case ok && m.PullFromMirror != was.PullFromMirror && m.PullFromMirror != sysregistriesv2.MirrorByDigestOnly:
				return fmt.Sprintf("registry %s: mirror %s pull-from-mirror changed to %q", s, m.Location, m.PullFromMirror)
			case !ok && m.PullFromMirror != sysregistriesv2.MirrorByDigestOnly && !n.MirrorByDigestOnly:
				return fmt.Sprintf("registry %s: mirror %s added without pull-from-mirror = %q", s, m.Location, sysregistriesv2.MirrorByDigestOnly)
			}
		}
		if why := unsafeBeyondMCO(o, n); why != "" {
			return fmt.Sprintf("registry %s: %s", s, why)
		}
	}
	return ""
}

// unsafeBeyondMCO names the changes of a registry's mirrors that the MCO lets through without a
// drain although pulls of running pods change: a mirror that now takes pulls it did not (tag
// pulls, once mirror-by-digest-only is turned off and the mirror has no digest-only
// pull-from-mirror), and a mirror whose insecure setting changed.
func unsafeBeyondMCO(o, n sysregistriesv2.Registry) string {
	for _, m := range n.Mirrors {
		was, ok := findMirror(o.Mirrors, m.Location)
		if !ok {
			continue
		}
		if before, now := pullsThrough(o, was), pullsThrough(n, m); before != now && now != sysregistriesv2.MirrorByDigestOnly {
			return fmt.Sprintf("mirror %s now takes %s pulls, not %s (mirror-by-digest-only %t to %t)", m.Location, now, before, o.MirrorByDigestOnly, n.MirrorByDigestOnly)
		}
		if m.Insecure != was.Insecure {
			return fmt.Sprintf("mirror %s: insecure changed", m.Location)
		}
	}
	return ""
}

// byScope indexes registries by scope; a later entry of the same scope wins, as in the MCO.
func byScope(rs []sysregistriesv2.Registry) map[string]sysregistriesv2.Registry {
	m := make(map[string]sysregistriesv2.Registry, len(rs))
	for _, r := range rs {
		m[scope(r)] = r
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
