package refresh_test

import (
	"math/rand"
	"reflect"
	"testing"
	"testing/quick"

	"github.com/bootimage-operator/bootimage-operator/refresh"
)

// Property: changing any payload input changes the payload hash.
func TestPayloadInputsChangeThePayloadHash(t *testing.T) {
	mutators := payloadMutators()
	prop := func(p refresh.PayloadInputs, pick uint8) bool {
		changed := p
		mutators[int(pick)%len(mutators)](&changed)
		return refresh.PayloadHash(changed) != refresh.PayloadHash(p)
	}
	if err := quick.Check(prop, &quick.Config{MaxCount: 2000}); err != nil {
		t.Fatal(err)
	}
}

// Property: changing any rollout input changes the rollout hash.
func TestRolloutInputsChangeTheRolloutHash(t *testing.T) {
	mutators := rolloutMutators()
	prop := func(r refresh.RolloutInputs, pick uint8) bool {
		changed := r
		changed.MachineConfigs = append([]string(nil), r.MachineConfigs...)
		changed.KernelArguments = append([]string(nil), r.KernelArguments...)
		changed.Extensions = append([]string(nil), r.Extensions...)
		mutators[int(pick)%len(mutators)](&changed)
		return refresh.RolloutHash(changed) != refresh.RolloutHash(r)
	}
	if err := quick.Check(prop, &quick.Config{MaxCount: 2000}); err != nil {
		t.Fatal(err)
	}
}

// The hashes are stable: nodes compare them with hashes computed by another build, so a change of
// the encoding must be deliberate (a new domain version), never a side effect.
func TestHashesAreStable(t *testing.T) {
	rollout := refresh.RolloutHash(refresh.RolloutInputs{
		ReleaseImage: "quay.io/openshift-release-dev/ocp-release@sha256:1", MachineConfigs: []string{"99-worker-ssh"},
		FIPS: true, KernelArguments: []string{"nosmt"}, KernelType: "realtime", Extensions: []string{"usbguard", "kerberos"}, OSImage: "quay.io/rhcos@sha256:2",
	})
	payload := refresh.PayloadHash(refresh.PayloadInputs{
		SSHKey: "ssh-ed25519 AAAA", PullSecret: []byte(`{"auths":{}}`), TrustBundle: []byte("-----BEGIN CERTIFICATE-----"),
		ImageContentSources: []string{"quay.io=mirror.example.com"}, Proxy: "http://proxy:3128", ImageConfig: "{}",
	})
	for name, got := range map[string][2]string{
		"rollout": {rollout, goldenRolloutHash},
		"payload": {payload, goldenPayloadHash},
	} {
		if got[0] != got[1] {
			t.Errorf("%s hash is %s, want %s", name, got[0], got[1])
		}
	}
}

// Extensions are a set, kernel arguments a command line: reordering the first keeps the rollout
// hash, reordering the second changes it.
func TestRolloutHashOrder(t *testing.T) {
	base := refresh.RolloutInputs{Extensions: []string{"a", "b"}, KernelArguments: []string{"x", "y"}}
	swappedExt := base
	swappedExt.Extensions = []string{"b", "a"}
	swappedArgs := base
	swappedArgs.KernelArguments = []string{"y", "x"}
	if refresh.RolloutHash(swappedExt) != refresh.RolloutHash(base) {
		t.Error("reordered extensions changed the rollout hash")
	}
	if refresh.RolloutHash(swappedArgs) == refresh.RolloutHash(base) {
		t.Error("reordered kernel arguments kept the rollout hash")
	}
}

// Every field of each input struct has a mutator, so a new field cannot be left out of a hash
// without this test failing.
func TestEveryInputHasAMutator(t *testing.T) {
	if n := reflect.TypeOf(refresh.PayloadInputs{}).NumField(); n != len(payloadMutators()) {
		t.Fatalf("PayloadInputs has %d fields, %d mutators", n, len(payloadMutators()))
	}
	if n := reflect.TypeOf(refresh.RolloutInputs{}).NumField(); n != len(rolloutMutators()) {
		t.Fatalf("RolloutInputs has %d fields, %d mutators", n, len(rolloutMutators()))
	}
}

// Concatenation must not collide: moving a character from one field to the next changes the hash.
func TestNoConcatenationCollisions(t *testing.T) {
	a := refresh.PayloadInputs{SSHKey: "ab", Proxy: "c"}
	b := refresh.PayloadInputs{SSHKey: "a", Proxy: "bc"}
	if refresh.PayloadHash(a) == refresh.PayloadHash(b) {
		t.Fatal("field boundaries are not encoded")
	}
	c := refresh.RolloutInputs{MachineConfigs: []string{"a", "b"}}
	d := refresh.RolloutInputs{MachineConfigs: []string{"ab"}}
	if refresh.RolloutHash(c) == refresh.RolloutHash(d) {
		t.Fatal("list element boundaries are not encoded")
	}
}

const (
	goldenRolloutHash = "5fa680e6ed4557d8b40f05100b75c75fcd353238f49b666b35befe3606e028ed"
	goldenPayloadHash = "b580dc5d1059de4f6af365849a173b42086f1b260922d303d50d4bf7db186c7d"
)

func payloadMutators() []func(*refresh.PayloadInputs) {
	return []func(*refresh.PayloadInputs){
		func(p *refresh.PayloadInputs) { p.SSHKey += "x" },
		func(p *refresh.PayloadInputs) { p.PullSecret = append(append([]byte(nil), p.PullSecret...), 'x') },
		func(p *refresh.PayloadInputs) { p.TrustBundle = append(append([]byte(nil), p.TrustBundle...), 'x') },
		func(p *refresh.PayloadInputs) {
			p.ImageContentSources = append(append([]string(nil), p.ImageContentSources...), "x")
		},
		func(p *refresh.PayloadInputs) { p.Proxy += "x" },
		func(p *refresh.PayloadInputs) { p.ImageConfig += "x" },
	}
}

func rolloutMutators() []func(*refresh.RolloutInputs) {
	return []func(*refresh.RolloutInputs){
		func(r *refresh.RolloutInputs) { r.ReleaseImage += "x" },
		func(r *refresh.RolloutInputs) { r.MachineConfigs = append(r.MachineConfigs, "x") },
		func(r *refresh.RolloutInputs) { r.FIPS = !r.FIPS },
		func(r *refresh.RolloutInputs) { r.KernelArguments = append(r.KernelArguments, "x") },
		func(r *refresh.RolloutInputs) { r.KernelType += "x" },
		func(r *refresh.RolloutInputs) { r.Extensions = append(r.Extensions, "x"+randomSuffix()) },
		func(r *refresh.RolloutInputs) { r.OSImage += "x" },
	}
}

func randomSuffix() string { return string(rune('a' + rand.Intn(26))) }
