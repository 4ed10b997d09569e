package bench_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/coreos/stream-metadata-go/stream"
	configv1 "github.com/openshift/api/config/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bootimage-operator/bootimage-operator/bootimage/aws"
	"github.com/bootimage-operator/bootimage-operator/featuregates"
	"github.com/bootimage-operator/bootimage-operator/internal/kube"
	"github.com/bootimage-operator/bootimage-operator/test/fakecloud"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
	"github.com/bootimage-operator/bootimage-operator/test/testenv"
)

// copyTime is how long the fake EC2 takes to make an AMI copy available: real ones take minutes.
const copyTime = 20 * time.Second

// BenchmarkScaleAWSCopy: N MachineSets (BENCH_COPY_MACHINESETS, default 200) on the installer's
// AMI copy in a region the stream lacks; the wave's new stream needs a new copy. The floor is the
// same patches sent by a plain client plus the copy's time; CopyImage must be sent once.
func BenchmarkScaleAWSCopy(b *testing.B) {
	n := envInt("BENCH_COPY_MACHINESETS", 200)
	idle := time.Duration(envInt("BENCH_IDLE", 60)) * time.Second
	benchmarkRun(b, fmt.Sprintf("scale-AWSCopy-%d.json", n), func(ctx context.Context) (ScaleResult, error) {
		return runCopyScale(ctx, b, n, idle)
	})
}

func runCopyScale(ctx context.Context, b *testing.B, n int, idle time.Duration) (ScaleResult, error) {
	const region = "ap-south-1"
	res := ScaleResult{Platform: "AWSCopy", MachineSets: n, IdleSeconds: idle.Seconds()}
	env, c, err := startEnv(testenv.Options{})
	if err != nil {
		return res, err
	}
	defer func() { _ = env.Stop() }()

	dir := b.TempDir()
	operatorEnv := os.Environ()
	infra := fixtures.Infrastructure(configv1.AWSPlatformType)
	ec2, err := fakeEC2(ctx, c, dir, infra, &operatorEnv)
	if err != nil {
		return res, err
	}
	defer ec2.Close()
	ec2.CopyTime = copyTime
	// The installer's copy of the first stream's us-east-1 AMI: the MachineSets start up to date.
	ec2.AddImages(aws.Image{ImageID: "ami-0installer0000001", OwnerID: fakecloud.SelfAccount, Region: region, State: "available", CreationDate: "2024-07-01T00:00:00.000Z",
		Tags: map[string]string{aws.TagName: aws.InstallerCopyName("demo-x7k2p", region), aws.OwnedTag("demo-x7k2p"): "owned", aws.TagSourceAMI: fixtures.OldAWSAMI, aws.TagSourceRegion: "us-east-1"}})
	before, after := fixtures.Stream(), fixtures.Stream()
	before.Architectures["x86_64"].Images.Aws.Regions["us-east-1"] = stream.SingleImage{Release: fixtures.StreamRelease, Image: fixtures.OldAWSAMI}
	copySecret := fixtures.AWSCredentialsSecret()
	copySecret.ObjectMeta = metav1.ObjectMeta{Namespace: kube.MachineAPINamespace, Name: aws.CopyCredentialsSecret}
	if err := fixtures.Create(ctx, c,
		infra, copySecret,
		fixtures.FeatureGate(configv1.TechPreviewNoUpgrade, fixtures.ReleaseVersion, []configv1.FeatureGateName{featuregates.BootImageSkewEnforcement}, nil),
		fixtures.ClusterVersion(fixtures.ReleaseVersion, true),
		fixtures.MachineConfiguration(nil),
		fixtures.BootImagesConfigMap(before, fixtures.ReleaseVersion),
		fixtures.UserDataSecret("worker-user-data", fixtures.IgnitionStubV3),
	); err != nil {
		return res, err
	}
	providerSpec := fixtures.AWSProviderSpecByFilter(region, "demo-x7k2p")
	for i := range n {
		if err := c.Create(ctx, fixtures.MachineSet(fmt.Sprintf("worker-%05d", i), providerSpec)); err != nil {
			return res, err
		}
	}

	// The floor: the same patches, plus the copy's own time, which nothing can shorten.
	floor, err := floorSeconds(ctx, c, n)
	if err != nil {
		return res, err
	}
	res.FloorSeconds = floor + copyTime.Seconds()

	run, err := startMachineSetWave(ctx, env, c, dir, operatorEnv, n, ec2, after)
	if err != nil {
		return res, err
	}
	defer run.stop()
	onCopy := func(ms *machinev1beta1.MachineSet) bool {
		copies := ec2.CopyRequests()
		return len(copies) == 1 && imageOf(ms, amiID) == copies[0].ImageID
	}
	if err := run.converge(ctx, run.sets, n, &res, onCopy); err != nil {
		return res, err
	}
	// The first pass copies nothing (every MachineSet boots a copy of the first stream's AMI): every
	// CopyImage is the wave's.
	res.CopyImages = ec2.CopyCalls.Load()
	return res, run.finish(&res, idle, run.operator, run.sets)
}

func amiID(ps map[string]any) any {
	ami, _ := ps["ami"].(map[string]any)
	return ami["id"]
}
