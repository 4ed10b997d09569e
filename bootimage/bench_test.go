package bootimage_test

import (
	"context"
	"fmt"
	"testing"

	configv1 "github.com/openshift/api/config/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
)

// BenchmarkDecide500MachineSets decides a large cluster's MachineSets once, as a full resync
// does: the stream is parsed once (as the operator's inputs.StreamCache does) and every decision
// reads it, so this bounds the decisions' own cost of a relist.
func BenchmarkDecide500MachineSets(b *testing.B) {
	cluster := fixtures.DecisionCluster(configv1.AWSPlatformType)
	cluster.BootImages.ResourceVersion = "1"
	streams, err := bootimage.ParseBootImages(cluster.BootImages)
	if err != nil {
		b.Fatal(err)
	}
	cluster.ParseStreams = func(*corev1.ConfigMap) (*bootimage.Streams, error) { return streams, nil }
	objs := make([]bootimage.Object, 500)
	for i := range objs {
		objs[i] = bootimage.MachineSetObject(fixtures.MachineSet(fmt.Sprintf("worker-%d", i), fixtures.AWSProviderSpec("us-east-1", fixtures.OldAWSAMI)))
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		for _, o := range objs {
			if d, err := bootimage.Decide(ctx, cluster, o); err != nil || d.Action != bootimage.Update {
				b.Fatalf("%v %s", err, d.Message)
			}
		}
	}
}
