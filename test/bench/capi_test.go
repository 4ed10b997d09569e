package bench_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/coreos/stream-metadata-go/stream"
	configv1 "github.com/openshift/api/config/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/featuregates"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
	"github.com/bootimage-operator/bootimage-operator/test/testenv"
)

// BenchmarkScaleCAPIAWS is the wave over N Cluster API MachineSets on AWS (N from
// BENCH_CAPI_MACHINESETS, default 500), each on its own AWSMachineTemplate. Updating one is a
// template create and an owner patch, so the floor is N bare creates and N guarded patches.
func BenchmarkScaleCAPIAWS(b *testing.B) {
	n := envInt("BENCH_CAPI_MACHINESETS", 500)
	idle := time.Duration(envInt("BENCH_IDLE", 60)) * time.Second
	benchmarkRun(b, fmt.Sprintf("scale-capi-AWS-%d.json", n), func(ctx context.Context) (ScaleResult, error) {
		res, err := runCAPIScale(ctx, b, n, idle)
		if err == nil && (res.TemplateCreates != n || res.MachineSetWrites != n || res.IdleWrites != 0) {
			b.Fatalf("writes: %d template creates, %d MachineSet writes, %d while idle; want %d, %d, 0", res.TemplateCreates, res.MachineSetWrites, res.IdleWrites, n, n)
		}
		return res, err
	})
}

const (
	templateAPIVersion = "infrastructure.cluster.x-k8s.io/v1beta2"
	capiAPIVersion     = "cluster.x-k8s.io/v1beta2"
)

func unstructuredList(apiVersion, kind string) *unstructured.UnstructuredList {
	l := &unstructured.UnstructuredList{}
	l.SetAPIVersion(apiVersion)
	l.SetKind(kind + "List")
	return l
}

func runCAPIScale(ctx context.Context, b *testing.B, n int, idle time.Duration) (ScaleResult, error) {
	res := ScaleResult{Platform: "AWS Cluster API", MachineSets: n, IdleSeconds: idle.Seconds()}
	env, c, err := startEnv(testenv.Options{CAPI: true})
	if err != nil {
		return res, err
	}
	defer func() { _ = env.Stop() }()

	before, after := fixtures.Stream(), fixtures.Stream()
	before.Architectures["x86_64"].Images.Aws.Regions["us-east-1"] = stream.SingleImage{Release: fixtures.StreamRelease, Image: fixtures.OldAWSAMI}
	dir := b.TempDir()
	operatorEnv := os.Environ()
	infra := fixtures.Infrastructure(configv1.AWSPlatformType)
	ec2, err := fakeEC2(ctx, c, dir, infra, &operatorEnv)
	if err != nil {
		return res, err
	}
	defer ec2.Close()
	if err := fixtures.Create(ctx, c,
		infra,
		fixtures.FeatureGate(configv1.TechPreviewNoUpgrade, fixtures.ReleaseVersion, []configv1.FeatureGateName{featuregates.ManagedBootImagesAWSCAPI}, nil),
		fixtures.ClusterVersion(fixtures.ReleaseVersion, true),
		fixtures.MachineConfiguration(&operatorv1.ManagedBootImages{MachineManagers: []operatorv1.MachineManager{fixtures.ClusterAPIManager(operatorv1.MachineSets, operatorv1.All)}}),
		fixtures.BootImagesConfigMap(before, fixtures.ReleaseVersion),
	); err != nil {
		return res, err
	}
	name := func(i int) string { return fmt.Sprintf("worker-%05d", i) }
	for i := range n {
		if err := c.Create(ctx, fixtures.AWSMachineTemplate(name(i)+"-0a1b2c3d", fixtures.OldAWSAMI)); err != nil {
			return res, err
		}
		if err := c.Create(ctx, fixtures.ClusterAPIOwner("MachineSet", name(i), name(i)+"-0a1b2c3d")); err != nil {
			return res, err
		}
	}

	// The floor: what updating a Cluster API MachineSet takes at least, one after another,
	// unthrottled: create the template's copy, then patch the owner onto it, guarded by the old name.
	start := time.Now()
	for i := range n {
		if err := c.Create(ctx, fixtures.AWSMachineTemplate(name(i)+"-f100f100", fixtures.OldAWSAMI)); err != nil {
			return res, err
		}
		owner := fixtures.ClusterAPIOwner("MachineSet", name(i), "")
		patch := fmt.Sprintf(`[{"op":"test","path":"/spec/template/spec/infrastructureRef/name","value":%q},{"op":"replace","path":"/spec/template/spec/infrastructureRef/name","value":%q}]`, name(i)+"-0a1b2c3d", name(i)+"-f100f100")
		if err := c.Patch(ctx, owner, client.RawPatch(types.JSONPatchType, []byte(patch))); err != nil {
			return res, err
		}
	}
	res.FloorSeconds = time.Since(start).Seconds()

	operator, err := startOperator(ctx, env, c, dir, operatorEnv, progressingFalse(0, n))
	if err != nil {
		return res, err
	}
	defer func() { _ = operator.Process.Kill() }()

	inCAPI := client.InNamespace(bootimage.ClusterAPINamespace)
	templates, err := resumingWatch(ctx, c, unstructuredList(templateAPIVersion, "AWSMachineTemplate"), inCAPI)
	if err != nil {
		return res, err
	}
	defer templates.Stop()
	owners, err := resumingWatch(ctx, c, unstructuredList(capiAPIVersion, "MachineSet"), inCAPI)
	if err != nil {
		return res, err
	}
	defer owners.Stop()
	wave, err := startMeasuredWave(ctx, c, ec2, after)
	if err != nil {
		return res, err
	}
	defer wave.mcs.Stop()
	// An owner is updated once it names a template the wave created with the new AMI; the two
	// watches may deliver the create and the patch in either order.
	amiOf, templateOf := map[string]any{}, map[string]string{}
	updated := func() int {
		count := 0
		for _, t := range templateOf {
			if amiOf[t] == fixtures.NewAWSAMIUSEast1 {
				count++
			}
		}
		return count
	}
	var latest *operatorv1.MachineConfiguration
	for latest == nil || updated() < n || !progressingFalse(0, n)(latest) {
		select {
		case ev, ok := <-templates.ResultChan():
			if !ok {
				return res, fmt.Errorf("the AWSMachineTemplate watch ended")
			}
			if t, isU := ev.Object.(*unstructured.Unstructured); isU && ev.Type != watch.Bookmark {
				if ev.Type == watch.Added {
					res.TemplateCreates++
					amiOf[t.GetName()], _, _ = unstructured.NestedFieldCopy(t.Object, "spec", "template", "spec", "ami", "id")
				} else {
					return res, fmt.Errorf("AWSMachineTemplate %s: %s while updating, want only creates", t.GetName(), ev.Type)
				}
			}
		case ev, ok := <-owners.ResultChan():
			if !ok {
				return res, fmt.Errorf("the MachineSet watch ended")
			}
			if ms, isU := ev.Object.(*unstructured.Unstructured); isU && ev.Type == watch.Modified {
				res.MachineSetWrites++
				templateOf[ms.GetName()], _, _ = unstructured.NestedString(ms.Object, "spec", "template", "spec", "infrastructureRef", "name")
			}
		case ev, ok := <-wave.mcs.ResultChan():
			if !ok {
				return res, fmt.Errorf("the MachineConfiguration watch ended")
			}
			if mc, isMC := ev.Object.(*operatorv1.MachineConfiguration); isMC && ev.Type == watch.Modified {
				res.StatusWrites++
				latest = mc
			}
		case <-ctx.Done():
			return res, fmt.Errorf("wave: %d of %d Cluster API MachineSets updated: %w", updated(), n, ctx.Err())
		}
	}
	return res, wave.finish(&res, idle, operator, templates, owners)
}

// writesWithin counts the writes the watches see during d.
func writesWithin(d time.Duration, watches ...watch.Interface) int {
	writes := 0
	quiet := time.After(d)
	events := make(chan watch.Event)
	done := make(chan struct{})
	defer close(done)
	for _, w := range watches {
		go func() {
			for ev := range w.ResultChan() {
				select {
				case events <- ev:
				case <-done:
					return
				}
			}
		}()
	}
	for {
		select {
		case ev := <-events:
			if ev.Type != watch.Bookmark && ev.Type != watch.Error {
				writes++
			}
		case <-quiet:
			return writes
		}
	}
}
