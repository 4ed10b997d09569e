package refresh

import (
	"slices"

	"github.com/BurntSushi/toml"
)

// registriesConf is the part of containers-registries.conf(5) v2 whose changes decide a drain.
type registriesConf struct {
	UnqualifiedSearchRegistries []string `toml:"unqualified-search-registries"`
	Registries                  []struct {
		Prefix   string `toml:"prefix"`
		Location string `toml:"location"`
		Blocked  bool   `toml:"blocked"`
		Insecure bool   `toml:"insecure"`
		Mirrors  []struct {
			Location string `toml:"location"`
		} `toml:"mirror"`
	} `toml:"registry"`
}

// registriesVerdict reloads crio when registries and mirrors were only added, and drains first
// when any was removed, reordered or changed, since running pods may be pulling through them.
func registriesVerdict(rule string, c Change) verdict {
	reload := []Action{{Type: ActionReload, Unit: "crio.service"}}
	var old, new registriesConf
	if c.What == "removed" {
		return verdict{outcome: InPlace, rule: rule + ": removed, drain then reload crio.service", actions: append([]Action{{Type: ActionDrain}}, reload...)}
	}
	if _, err := toml.Decode(string(c.New), &new); err != nil {
		return verdict{outcome: Reboot, rule: rule + ": new contents are not valid TOML (" + err.Error() + ")"}
	}
	if c.What != "added" {
		if _, err := toml.Decode(string(c.Old), &old); err != nil {
			return verdict{outcome: InPlace, rule: rule + ": old contents are not valid TOML, drain then reload crio.service", actions: append([]Action{{Type: ActionDrain}}, reload...)}
		}
	}
	if onlyAdded(old, new) {
		return verdict{outcome: InPlace, rule: rule + ": registries or mirrors only added, Reload crio.service", actions: reload}
	}
	return verdict{outcome: InPlace, rule: rule + ": a registry or mirror was removed, reordered or changed, Drain then Reload crio.service", actions: append([]Action{{Type: ActionDrain}}, reload...)}
}

// onlyAdded reports whether new keeps every registry and mirror of old, unchanged and in the same
// relative order.
func onlyAdded(old, new registriesConf) bool {
	if !isSubsequence(old.UnqualifiedSearchRegistries, new.UnqualifiedSearchRegistries) {
		return false
	}
	key := func(prefix, location string) string { return prefix + "\x00" + location }
	newByKey := map[string]int{}
	var newKeys []string
	for i, r := range new.Registries {
		k := key(r.Prefix, r.Location)
		newByKey[k] = i
		newKeys = append(newKeys, k)
	}
	var oldKeys []string
	for _, r := range old.Registries {
		k := key(r.Prefix, r.Location)
		oldKeys = append(oldKeys, k)
		i, ok := newByKey[k]
		if !ok {
			return false
		}
		n := new.Registries[i]
		if n.Blocked != r.Blocked || n.Insecure != r.Insecure {
			return false
		}
		var om, nm []string
		for _, m := range r.Mirrors {
			om = append(om, m.Location)
		}
		for _, m := range n.Mirrors {
			nm = append(nm, m.Location)
		}
		if !isSubsequence(om, nm) {
			return false
		}
	}
	return isSubsequence(oldKeys, newKeys)
}

// isSubsequence reports whether every element of a appears in b in the same order.
func isSubsequence(a, b []string) bool {
	i := 0
	for _, v := range b {
		if i < len(a) && a[i] == v {
			i++
		}
	}
	return i == len(a) && !slices.ContainsFunc(a, func(s string) bool { return !slices.Contains(b, s) })
}
