package refresh_test

import (
	"encoding/json"
	"fmt"
	"testing"

	ign "github.com/coreos/ignition/v2/config/v3_5/types"

	"github.com/bootimage-operator/bootimage-operator/refresh"
)

// bigConfigs returns two Ignition configs of n files each, differing in every hundredth file,
// as JSON.
func bigConfigs(n int) (oldRaw, newRaw []byte) {
	build := func(variant string) []byte {
		cfg := ign.Config{Ignition: ign.Ignition{Version: "3.4.0"}}
		for i := range n {
			contents := fmt.Sprintf("data:,file%%20%d%%20contents", i)
			if i%100 == 0 {
				contents += variant
			}
			mode := 0o644
			cfg.Storage.Files = append(cfg.Storage.Files, ign.File{
				Node:          ign.Node{Path: fmt.Sprintf("/etc/containers/registries.d/f%05d.yaml", i)},
				FileEmbedded1: ign.FileEmbedded1{Contents: ign.Resource{Source: &contents}, Mode: &mode},
			})
		}
		out, _ := json.Marshal(cfg)
		return out
	}
	return build("a"), build("b")
}

// BenchmarkDecide10kFiles diffs and decides two parsed 10,000-file configs; compare it with
// BenchmarkDecodeJSON10kFiles, the cost of merely JSON-decoding both.
func BenchmarkDecide10kFiles(b *testing.B) {
	oldRaw, newRaw := bigConfigs(10000)
	oldCfg, err := refresh.Parse(oldRaw)
	if err != nil {
		b.Fatal(err)
	}
	newCfg, err := refresh.Parse(newRaw)
	if err != nil {
		b.Fatal(err)
	}
	policies := refresh.DefaultPolicies()
	b.ReportAllocs()
	for b.Loop() {
		changes, err := refresh.Diff(oldCfg, newCfg)
		if err != nil {
			b.Fatal(err)
		}
		if res := refresh.Decide(changes, policies); res.Outcome != refresh.InPlace || len(res.Changes) != 100 {
			b.Fatalf("unexpected %s with %d changes", res.Outcome, len(res.Changes))
		}
	}
}

// BenchmarkDecodeJSON10kFiles is the baseline: json.Unmarshal of both configs.
func BenchmarkDecodeJSON10kFiles(b *testing.B) {
	oldRaw, newRaw := bigConfigs(10000)
	b.ReportAllocs()
	for b.Loop() {
		var o, n ign.Config
		if err := json.Unmarshal(oldRaw, &o); err != nil {
			b.Fatal(err)
		}
		if err := json.Unmarshal(newRaw, &n); err != nil {
			b.Fatal(err)
		}
	}
}
