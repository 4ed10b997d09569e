package vsphere_test

import (
	"context"
	"errors"
	"path"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/bootimage/vsphere"
	"github.com/bootimage-operator/bootimage-operator/test/expect"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
)

type mutate = fixtures.Mutation

var labelled = fixtures.OSStreamLabelled

const rhel10 = fixtures.OSStreamRHEL10

// folderTemplates is vCenter as a map of inventory path to template; err, when set, fails reads.
type folderTemplates struct {
	byPath map[string]vsphere.Template
	err    error
}

func (f folderTemplates) Template(_ context.Context, at vsphere.Location, name string) (*vsphere.Template, error) {
	if f.err != nil {
		return nil, f.err
	}
	if t, ok := f.byPath[path.Join(at.Folder, name)]; ok {
		t.Path = path.Join(at.Folder, name)
		return &t, nil
	}
	return nil, nil
}

var _ = Describe("vSphere decisions", func() {
	const (
		folder    = "/dc1/vm/demo-x7k2p"
		installed = "demo-x7k2p-rhcos-region-a-zone-a"
		computed  = "demo-x7k2p-rhcos-fd1"
		ovaSHA    = "0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9"
	)
	ws := fixtures.VSphereWorkspace{Server: "vcenter.example.com", Datacenter: "dc1", Folder: folder, Datastore: "/dc1/datastore/ds1", ResourcePool: "/dc1/host/c1/Resources"}
	release := fixtures.StreamRelease

	var templates folderTemplates
	BeforeEach(func() {
		templates = folderTemplates{byPath: map[string]vsphere.Template{
			folder + "/" + installed: {Version: "9.4.20240101-0", DiskType: "eagerZeroedThick", IsTemplate: true},
		}}
	})

	decideVSphere := func(template string, mutations ...mutate) bootimage.Decision {
		GinkgoHelper()
		c, o := fixtures.DecisionCluster(configv1.VSpherePlatformType), fixtures.DecisionMachineSet(fixtures.VSphereProviderSpecAt(template, ws))
		c.Infrastructure = &configv1.Infrastructure{Spec: configv1.InfrastructureSpec{PlatformSpec: configv1.PlatformSpec{VSphere: fixtures.VSpherePlatformSpec("fd1", 443, ws, "/dc1/host/c1", "ci-segment")}}}
		c.BootImages = fixtures.BootImagesConfigMap(fixtures.WithVSphereOVA(fixtures.Stream(), release, "https://mirror/rhcos.ova", ovaSHA), "4.20.3")
		c.Cloud = templates
		for _, m := range mutations {
			m(&c, &o)
		}
		d, err := bootimage.Decide(context.Background(), c, o)
		Expect(err).NotTo(HaveOccurred())
		return d
	}

	It("imports the stream's OVA over an outdated template, keeping its name", func() {
		d := decideVSphere(installed)
		Expect(d).To(And(HaveField("Action", bootimage.Update), HaveField("Reason", bootimage.ReasonImageOutdated)))
		Expect(d.Current).To(Equal(installed + "@9.4.20240101-0"))
		Expect(d.Target).To(Equal(installed+"@"+release), "the name is stable, so the target carries the version")
		Expect(*vsphere.ImportOf(d)).To(Equal(vsphere.Import{
			Location: vsphere.Location{Server: ws.Server, Port: 443, Datacenter: "dc1", Folder: folder},
			Name:     installed, ComputeCluster: "/dc1/host/c1", ResourcePool: ws.ResourcePool, Datastore: ws.Datastore, Network: "ci-segment",
			Release: release, OVALocation: "https://mirror/rhcos.ova", OVASHA256: ovaSHA, InfrastructureName: "demo-x7k2p",
		}))
		_, after := expect.AppliedPatch(fixtures.VSphereProviderSpecAt(installed, ws), d)
		Expect(after["template"]).To(Equal(installed))
	})

	Context("with two OS streams", func() {
		on50 := func(c *bootimage.Cluster, _ *bootimage.Object) {
			streams := fixtures.Streams50()
			streams["rhel-9"] = fixtures.WithVSphereOVA(streams["rhel-9"], release, "https://mirror/rhcos.ova", ovaSHA)
			c.BootImages = fixtures.BootImagesConfigMap50(streams, fixtures.OCP50ReleaseVersion)
		}
		It("never imports a rhel-10 OVA over a rhel-9 template: the rhel-10 one has a name of its own", func() {
			d := decideVSphere(installed, on50, labelled(rhel10))
			Expect(d.Action).To(Equal(bootimage.Update), d.Message)
			Expect(vsphere.ImportOf(d).Name).To(Equal("demo-x7k2p-rhcos-rhel-10-fd1"))
			Expect(vsphere.ImportOf(d).Release).To(Equal(fixtures.RHEL10Release))
			Expect(vsphere.ImportOf(d).OVALocation).To(Equal(fixtures.RHEL10VSphereOVA))
		})
		It("keeps the MCO's name for rhel-9 while it holds a rhel-9 template", func() {
			templates.byPath[folder+"/"+computed] = vsphere.Template{Version: "9.4.20240101-0", IsTemplate: true}
			d := decideVSphere("elsewhere/custom", on50, labelled("rhel-9"))
			Expect(vsphere.ImportOf(d).Name).To(Equal(computed))
			Expect(vsphere.ImportOf(d).Release).To(Equal(release))
		})
		It("never imports a rhel-9 OVA over a rhel-10 template: the MCO's name taken, rhel-9 gets its own", func() {
			templates.byPath[folder+"/"+computed] = vsphere.Template{Version: fixtures.RHEL10Release, IsTemplate: true}
			d := decideVSphere(computed, on50, labelled("rhel-9"))
			Expect(d.Action).To(Equal(bootimage.Update), d.Message)
			Expect(vsphere.ImportOf(d).Name).To(Equal("demo-x7k2p-rhcos-rhel-9-fd1"))
			Expect(vsphere.ImportOf(d).Release).To(Equal(release))
		})
		It("updates a rhel-10 template in place with the rhel-10 OVA", func() {
			templates.byPath[folder+"/"+computed] = vsphere.Template{Version: "10.0.20251101-0", IsTemplate: true}
			d := decideVSphere(computed, on50, labelled(rhel10))
			Expect(vsphere.ImportOf(d).Name).To(Equal(computed))
			Expect(vsphere.ImportOf(d).Release).To(Equal(fixtures.RHEL10Release))
		})
		It("skips when every name of the stream holds another stream's template", func() {
			templates.byPath[folder+"/"+computed] = vsphere.Template{Version: fixtures.RHEL10Release, IsTemplate: true}
			templates.byPath[folder+"/demo-x7k2p-rhcos-rhel-9-fd1"] = vsphere.Template{Version: fixtures.RHEL10Release, IsTemplate: true}
			d := decideVSphere(computed, on50, labelled("rhel-9"))
			Expect(d.Action).To(Equal(bootimage.Skip))
			Expect(d.Reason).To(Equal(bootimage.ReasonOSStreamTemplateTaken))
			Expect(vsphere.ImportOf(d)).To(BeNil())
		})
	})

	It("is up to date when the template is the stream's release", func() {
		templates.byPath[folder+"/"+installed] = vsphere.Template{Version: release, IsTemplate: true}
		d := decideVSphere(installed)
		Expect(d).To(And(HaveField("Action", bootimage.NoChange), HaveField("Reason", bootimage.ReasonUpToDate), HaveField("Prepare", BeNil())))
	})

	It("creates <infrastructureName>-rhcos-<failure domain> when the MachineSet's template is not in the workspace folder", func() {
		for _, template := range []string{"/dc1/vm/customer/golden", "golden"} {
			templates.byPath["/dc1/vm/customer/golden"] = vsphere.Template{Version: "9.4.20240101-0"}
			d := decideVSphere(template)
			Expect(d.Action).To(Equal(bootimage.Update), template)
			Expect(vsphere.ImportOf(d)).To(And(HaveField("Name", computed), HaveField("Folder", folder)), template)
			Expect(d.Message).To(ContainSubstring("is not in the workspace folder " + folder + ": importing the stream's OVA"))
			_, after := expect.AppliedPatch(fixtures.VSphereProviderSpecAt(template, ws), d)
			Expect(after["template"]).To(Equal(computed))
		}
	})

	It("points the MachineSet at the cluster's current template without importing", func() {
		templates.byPath[folder+"/"+computed] = vsphere.Template{Version: release, IsTemplate: true}
		d := decideVSphere("/dc1/vm/customer/golden")
		Expect(d).To(And(HaveField("Action", bootimage.Update), HaveField("Prepare", BeNil()), HaveField("Target", computed+"@"+release)))
	})

	It("finishes a swap an interruption left: a renamed-away template, or leftovers next to a current one", func() {
		importing, replaced := vsphere.SwapNames(installed)
		templates.byPath[folder+"/"+replaced] = templates.byPath[folder+"/"+installed]
		delete(templates.byPath, folder+"/"+installed)
		d := decideVSphere(installed)
		Expect(vsphere.ImportOf(d)).To(HaveField("Name", installed))
		Expect(d.Current).To(Equal(installed + "@9.4.20240101-0"))

		templates.byPath[folder+"/"+installed] = vsphere.Template{Version: release, IsTemplate: true}
		delete(templates.byPath, folder+"/"+replaced)
		templates.byPath[folder+"/"+importing] = vsphere.Template{Version: release}
		d = decideVSphere(installed)
		Expect(d.Action).To(Equal(bootimage.Update))
		Expect(d.Message).To(ContainSubstring("an interrupted swap left " + importing))
		Expect(vsphere.ImportOf(d)).NotTo(BeNil())
	})

	It("keys the hot-loop guard on the release, since the template name does not change", func() {
		d := decideVSphere(installed, func(c *bootimage.Cluster, o *bootimage.Object) {
			o.Patched = bootimage.Attempts{Target: installed + "@" + release, Count: bootimage.HotLoopLimit, Selection: bootimage.SelectionKey(c.Effective, o.Resource)}
		})
		Expect(d).To(And(HaveField("Action", bootimage.Error), HaveField("Reason", bootimage.ReasonHotLoopDetected), HaveField("Prepare", BeNil())))
	})

	DescribeTable("leaves alone, with a reason",
		func(template string, mutation mutate, action bootimage.Action, reason, message string) {
			d := decideVSphere(template, mutation)
			Expect(d).To(And(HaveField("Action", action), HaveField("Reason", reason), HaveField("Prepare", BeNil())))
			Expect(d.Message).To(ContainSubstring(message))
		},
		Entry("a workspace of no failure domain", installed, func(c *bootimage.Cluster, _ *bootimage.Object) {
			c.Infrastructure.Spec.PlatformSpec.VSphere.FailureDomains[0].Topology.Datastore = "/dc1/datastore/other"
		}, bootimage.Skip, bootimage.ReasonFailureDomainMismatch, "providerSpec workspace (server: vcenter.example.com, datacenter: dc1, datastore: /dc1/datastore/ds1, resourcePool: /dc1/host/c1/Resources) matches no vCenter"),
		Entry("a cluster without failure domains", installed, func(c *bootimage.Cluster, _ *bootimage.Object) { c.Infrastructure.Spec.PlatformSpec.VSphere = nil },
			bootimage.Skip, bootimage.ReasonFailureDomainMismatch, "matches no vCenter"),
		Entry("an offline plan", installed, func(c *bootimage.Cluster, _ *bootimage.Object) { c.Cloud = nil },
			bootimage.Skip, bootimage.ReasonVCenterNotConsulted, "template "+installed+": vCenter vcenter.example.com not consulted, so its RHCOS version is unknown; the stream's is "+release+" (OVA https://mirror/rhcos.ova)"),
		Entry("no credentials", installed, func(c *bootimage.Cluster, _ *bootimage.Object) {
			c.Cloud = folderTemplates{err: bootimage.ErrNoCatalog}
		}, bootimage.Skip, bootimage.ReasonVCenterNotConsulted, "no credentials for vCenter vcenter.example.com"),
		Entry("a template without an RHCOS version", installed, func(*bootimage.Cluster, *bootimage.Object) {
			templates.byPath[folder+"/"+installed] = vsphere.Template{}
		}, bootimage.Skip, bootimage.ReasonCustomImage, "has no RHCOS product version"),
		Entry("a stream without an OVA checksum", installed, func(c *bootimage.Cluster, _ *bootimage.Object) {
			c.BootImages = fixtures.BootImagesConfigMap(fixtures.WithVSphereOVA(fixtures.Stream(), release, "https://mirror/rhcos.ova", ""), "4.20.3")
		}, bootimage.Skip, bootimage.ReasonTargetImageUnavailable, "no vmware OVA with a release and sha256 for x86_64"),
		Entry("a template name longer than vSphere's 80 characters", installed, func(c *bootimage.Cluster, _ *bootimage.Object) {
			c.Infrastructure.Spec.PlatformSpec.VSphere.FailureDomains[0].Name = strings.Repeat("f", 70)
			delete(templates.byPath, folder+"/"+installed)
		}, bootimage.Error, bootimage.ReasonTemplateNameTooLong, "longer than vSphere's 80 characters"),
		Entry("a providerSpec without a workspace folder", "x", func(_ *bootimage.Cluster, o *bootimage.Object) {
			o.ProviderSpec = []byte(`{"template": "x", "workspace": {"server": "vcenter.example.com"}}`)
		}, bootimage.Error, bootimage.ReasonInvalidProviderSpec, "workspace.server, datacenter and folder (an inventory path) must be set"),
	)

	It("returns a failed vCenter read as transient", func() {
		c, o := fixtures.DecisionCluster(configv1.VSpherePlatformType), fixtures.DecisionMachineSet(fixtures.VSphereProviderSpecAt(installed, ws))
		c.Infrastructure = &configv1.Infrastructure{Spec: configv1.InfrastructureSpec{PlatformSpec: configv1.PlatformSpec{VSphere: fixtures.VSpherePlatformSpec("fd1", 0, ws, "/dc1/host/c1", "ci-segment")}}}
		c.Cloud = folderTemplates{err: errors.New("connection refused")}
		_, err := bootimage.Decide(context.Background(), c, o)
		Expect(err).To(MatchError(ContainSubstring("looking up template " + installed + " in vCenter vcenter.example.com folder " + folder + ": connection refused")))
	})
})
