package refresh_test

import (
	"bytes"
	"encoding/json"
	"path"
	"slices"
	"testing"

	operatorv1 "github.com/openshift/api/operator/v1"

	"github.com/bootimage-operator/bootimage-operator/refresh"
	"github.com/bootimage-operator/bootimage-operator/refresh/internal/fuzzed"
)

// FuzzDecide parses two configs and decides: never a panic.
func FuzzDecide(f *testing.F) {
	f.Add([]byte(`{"ignition":{"version":"3.2.0"}}`), []byte(`{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/etc/motd","contents":{"source":"data:,hi"}}]}}`))
	f.Add([]byte(`{"kind":"MachineConfig","spec":{"config":{"ignition":{"version":"3.1.0"}},"fips":true}}`), []byte(`{"ignition":{"version":"3.2.0"},"storage":{"files":[{"path":"/etc/containers/registries.conf","contents":{"source":"data:,%5B%5Bregistry%5D%5D"}}]}}`))
	f.Add([]byte(`{"ignition":{"version":"3.2.0"},"storage":{"files":[{"path":"/x","contents":{"source":"data:;base64,H4sI","compression":"gzip"}}]}}`), []byte(`{}`))
	f.Add([]byte(`{"ignition":{"version":"3.2.0"},"passwd":{"users":[{"name":"core","sshAuthorizedKeys":["a"]},{"name":"admin"}]}}`), []byte(`{"ignition":{"version":"3.2.0"},"passwd":{"users":[{"name":"core"}]},"storage":{"links":[{"path":"/etc/l","target":"/x"}]}}`))
	policies := refresh.DefaultPolicies()
	f.Fuzz(func(t *testing.T, oldRaw, newRaw []byte) {
		newCfg, changes, ok := fuzzed.Changes(oldRaw, newRaw)
		if !ok {
			return
		}
		if res := refresh.Decide(changes, policies); len(res.Changes) != len(changes) {
			t.Fatalf("%d changes, %d decisions", len(changes), len(res.Changes))
		}
		if same, err := refresh.Diff(newCfg, newCfg); err != nil || len(same) != 0 {
			t.Fatalf("a config differs from itself: %v %+v", err, same)
		}
	})
}

// FuzzMergePolicies merges fuzzed user policies into the defaults. Whatever merges must hold every
// user policy under its cleaned path (the last of a path winning), every default it does not
// replace, no path twice, and decide a change below each path.
func FuzzMergePolicies(f *testing.F) {
	f.Add([]byte(`{"files":[{"path":"/etc/app/","actions":[{"type":"None"}]},{"path":"/etc/containers/policy.json","actions":[{"type":"Reboot"}]}]}`))
	f.Add([]byte(`{"files":[{"path":"/etc/a","actions":[{"type":"Drain"},{"type":"Restart","restart":{"serviceName":"a.service"}}]},{"path":"/etc/a/","actions":[{"type":"Reload","reload":{"serviceName":"b.service"}}]}],"units":[{"name":"iri-registry.service","actions":[{"type":"None"}]}],"sshkey":{"actions":[{"type":"DaemonReload"}]}}`))
	f.Add([]byte(`{"files":[{"path":"/","actions":[{"type":"None"}]},{"path":"/etc/../var/x","actions":[{"type":"Restart","restart":{"serviceName":"update-ca-trust.service"}}]}]}`))
	defaults := refresh.DefaultPolicies()
	f.Fuzz(func(t *testing.T, raw []byte) {
		var user operatorv1.NodeDisruptionPolicyConfig
		if json.Unmarshal(raw, &user) != nil {
			return
		}
		merged, err := refresh.MergePolicies(user)
		if err != nil {
			return
		}
		byPath := map[string]operatorv1.NodeDisruptionPolicyStatusFile{}
		for _, p := range merged.Files {
			if _, dup := byPath[p.Path]; dup {
				t.Fatalf("path %s merged twice", p.Path)
			}
			byPath[p.Path] = p
		}
		userPaths := map[string]bool{}
		for _, u := range user.Files {
			userPaths[path.Clean(u.Path)] = true
			got := byPath[path.Clean(u.Path)]
			var last operatorv1.NodeDisruptionPolicySpecFile
			for _, x := range user.Files {
				if path.Clean(x.Path) == path.Clean(u.Path) {
					last = x
				}
			}
			if len(got.Actions) != len(last.Actions) {
				t.Fatalf("policy %s: merged %d actions, the user gave %d", u.Path, len(got.Actions), len(last.Actions))
			}
		}
		for _, d := range defaults.Files {
			if p, ok := byPath[d.Path]; !ok || (!userPaths[d.Path] && !equalJSON(p, d)) {
				t.Fatalf("default policy %s lost or changed", d.Path)
			}
		}
		for _, p := range merged.Files {
			name := p.Path + "/fuzzed.conf"
			changes := []refresh.Change{{Kind: refresh.KindFile, Name: name, What: "added"}}
			res := refresh.Decide(changes, merged)
			if res.Outcome == refresh.NoChange {
				t.Fatalf("a file added below %s decided as no change", p.Path)
			}
		}
	})
}

// FuzzRegistries decides fuzzed registries.conf changes with the default Special policy: crio is
// always reloaded, an unchanged file never drains, and contents that do not parse are refused.
func FuzzRegistries(f *testing.F) {
	f.Add([]byte(drainFixtures["mc1"]), []byte(drainFixtures["mc2"]))
	f.Add([]byte(drainFixtures["mc8"]), []byte(drainFixtures["mc10"]))
	f.Add([]byte(drainFixtures["mc12"]), []byte(drainFixtures["mc13"]))
	f.Add([]byte(`unqualified-search-registries = ["a"]`), []byte(`[[registry]`))
	policies := refresh.DefaultPolicies()
	decideChange := func(old, new []byte) refresh.Result {
		return refresh.Decide([]refresh.Change{{Kind: refresh.KindFile, Name: refresh.RegistriesConf, What: "contents", Old: old, New: new}}, policies)
	}
	f.Fuzz(func(t *testing.T, old, new []byte) {
		res := decideChange(old, new)
		switch res.Outcome {
		case refresh.Reject:
			return
		case refresh.InPlace:
		default:
			t.Fatalf("registries.conf decided %s", res.Outcome)
		}
		if !slices.Contains(res.Actions, refresh.Action{Type: refresh.ActionReload, Unit: "crio.service"}) {
			t.Fatalf("crio not reloaded: %+v", res.Actions)
		}
		if same := decideChange(new, bytes.Clone(new)); same.Outcome != refresh.InPlace || slices.Contains(same.Actions, refresh.Action{Type: refresh.ActionDrain}) {
			t.Fatalf("an unchanged registries.conf drains: %+v", same)
		}
	})
}

func equalJSON(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}
