package main

import (
	"context"
	"encoding/json"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/internal/kube"
	"github.com/bootimage-operator/bootimage-operator/test/fakecloud"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
	"github.com/bootimage-operator/bootimage-operator/test/testenv"
)

// Ordered for its BeforeAll: one vcsim vCenter and one cluster seeded with its template, read
// by both specs (offline and live), which write nothing there.
var _ = Describe("bootimagectl plan on vSphere", Ordered, func() {
	const template = "demo-x7k2p-rhcos-region-a-zone-a"
	var vc *fakecloud.VCenter
	var objects []client.Object
	var ws fixtures.VSphereWorkspace

	BeforeAll(func() {
		ctx := context.Background()
		var err error
		vc, err = fakecloud.NewVCenter(ctx)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(vc.Close)
		folder, err := vc.ClusterFolder(ctx, "demo-x7k2p")
		Expect(err).NotTo(HaveOccurred())
		Expect(vc.SeedTemplate(ctx, folder, template, "9.4.20240101-0", "demo-x7k2p")).To(Succeed())
		ws = fixtures.VSphereWorkspace{Server: vc.Server, Datacenter: fakecloud.VCenterDatacenter, Folder: folder, Datastore: fakecloud.VCenterDatastore, ResourcePool: fakecloud.VCenterPool}
		infra := fixtures.Infrastructure(configv1.VSpherePlatformType)
		infra.Spec.PlatformSpec.VSphere = fixtures.VSpherePlatformSpec("fd1", vc.Port, ws, fakecloud.VCenterCluster, fakecloud.VCenterNetwork)
		objects = []client.Object{
			infra,
			fixtures.FeatureGate(configv1.TechPreviewNoUpgrade, fixtures.ReleaseVersion, nil, nil),
			fixtures.ClusterVersion(fixtures.ReleaseVersion, true),
			fixtures.MachineConfiguration(nil),
			fixtures.BootImagesConfigMap(fixtures.WithVSphereOVA(fixtures.Stream(), fixtures.StreamRelease, "https://mirror.example.com/rhcos.ova", fakecloud.SHA256([]byte("ova"))), "4.20.3"),
			fixtures.UserDataSecret("worker-user-data", fixtures.IgnitionStubV3),
			fixtures.MachineSet("worker-a", fixtures.VSphereProviderSpecAt(template, ws)),
		}
	})

	decision := func(out string) bootimage.Decision {
		GinkgoHelper()
		var p Plan
		Expect(json.Unmarshal([]byte(out), &p)).To(Succeed())
		Expect(p.Items).To(HaveLen(1))
		return p.Items[0]
	}

	It("decides from the stream and the objects offline, saying vCenter was not consulted", func() {
		dir := GinkgoT().TempDir()
		writeYAML(filepath.Join(dir, "cluster.yaml"), objects...)
		code, out, stderr := runCLI("plan", "-f", dir, "-o", "json")
		Expect(stderr).To(BeEmpty())
		Expect(code).To(Equal(exitOK))
		Expect(decision(out)).To(And(HaveField("Action", bootimage.Skip), HaveField("Reason", bootimage.ReasonVCenterNotConsulted),
			HaveField("Message", ContainSubstring("the stream's is "+fixtures.StreamRelease+" (OVA https://mirror.example.com/rhcos.ova)"))))
	})

	It("reads the templates from vCenter on a live cluster, and writes nothing there", func() {
		ctx := context.Background()
		env := testenv.StartForSpecs(testenv.Options{})
		Expect(fixtures.Create(ctx, env.Client, objects...)).To(Succeed())
		Expect(env.Client.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: kube.VSphereCredentialsNamespace, Name: kube.VSphereCredentialsSecret},
			StringData: map[string]string{vc.Server + ".username": fakecloud.VCenterUsername, vc.Server + ".password": fakecloud.VCenterPassword},
		})).To(Succeed())
		kubeconfig := filepath.Join(GinkgoT().TempDir(), "kubeconfig")
		Expect(env.WriteKubeconfig(kubeconfig)).To(Succeed())
		ca, err := vc.CAFile()
		Expect(err).NotTo(HaveOccurred())
		sessions, err := vc.Sessions(ctx, fakecloud.VCenterUsername)
		Expect(err).NotTo(HaveOccurred())

		code, out, stderr := runCLI("plan", "--kubeconfig", kubeconfig, "--vcenter-ca", ca, "-o", "json")
		Expect(stderr).To(BeEmpty())
		Expect(code).To(Equal(exitOK))
		Expect(decision(out)).To(And(HaveField("Action", bootimage.Update), HaveField("Reason", bootimage.ReasonImageOutdated),
			HaveField("Current", template+"@9.4.20240101-0"), HaveField("Target", template+"@"+fixtures.StreamRelease)))
		Expect(vc.VMs(ctx, ws.Folder)).To(ConsistOf(template))
		Expect(vc.Sessions(ctx, fakecloud.VCenterUsername)).To(Equal(sessions), "the CLI logged out")

		// Without --vcenter-ca the simulator's certificate is not trusted: that row is an Error, as
		// the operator's would be, and the plan is still printed.
		code, out, _ = runCLI("plan", "--kubeconfig", kubeconfig, "-o", "json")
		Expect(code).To(Equal(exitItemErr))
		Expect(decision(out)).To(And(HaveField("Action", bootimage.Error), HaveField("Reason", bootimage.ReasonCloudLookupFailed),
			HaveField("Message", ContainSubstring("certificate")), HaveField("Current", template)))
	})
})
