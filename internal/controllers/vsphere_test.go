package controllers_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/bootimage/vsphere"
	"github.com/bootimage-operator/bootimage-operator/controllers"
	"github.com/bootimage-operator/bootimage-operator/internal/kube"
	"github.com/bootimage-operator/bootimage-operator/internal/seams"
	"github.com/bootimage-operator/bootimage-operator/internal/status"
	"github.com/bootimage-operator/bootimage-operator/manifests"
	"github.com/bootimage-operator/bootimage-operator/test/fakecloud"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
	"github.com/bootimage-operator/bootimage-operator/test/testenv"
)

const (
	oldRHCOS = "9.4.20240101-0"
	// installerTemplate is the template the installer imported for the failure domain.
	installerTemplate = "demo-x7k2p-rhcos-region-a-zone-a"
	// computedTemplate is the name the operator gives a template it creates, as the MCO does.
	computedTemplate = "demo-x7k2p-rhcos-fd1"
)

// vsphereWorld is a vCenter simulator with the cluster's workspace folder and an outdated
// template, a server of the stream's OVA, and a cluster on the real API server pointing at both.
type vsphereWorld struct {
	vc       *fakecloud.VCenter
	ovas     *fakecloud.OVAServer
	ws       fixtures.VSphereWorkspace
	cacheDir string
	newOVA   []byte
	// metrics are the operator's, read by decided.
	metrics *prometheus.Registry
	// steps records the template swap steps taken, in order; interrupted is the workspace
	// folder as an interrupted swap left it.
	mu          sync.Mutex
	steps       []vsphere.SwapStep
	interrupted []string
}

func newVSphereWorld() *vsphereWorld {
	GinkgoHelper()
	vc, err := fakecloud.NewVCenter(ctx)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(vc.Close)
	folder, err := vc.ClusterFolder(ctx, "demo-x7k2p")
	Expect(err).NotTo(HaveOccurred())
	w := &vsphereWorld{vc: vc, ovas: fakecloud.NewOVAServer(), cacheDir: GinkgoT().TempDir(), newOVA: fakecloud.OVA(fixtures.StreamRelease)}
	DeferCleanup(w.ovas.Close)
	w.ws = fixtures.VSphereWorkspace{
		Server: vc.Server, Datacenter: fakecloud.VCenterDatacenter, Folder: folder,
		Datastore: fakecloud.VCenterDatastore, ResourcePool: fakecloud.VCenterPool,
	}
	w.seedTemplate(folder, installerTemplate, oldRHCOS)

	infra := fixtures.Infrastructure(configv1.VSpherePlatformType)
	infra.Spec.PlatformSpec.VSphere = fixtures.VSpherePlatformSpec("fd1", vc.Port, w.ws, fakecloud.VCenterCluster, fakecloud.VCenterNetwork)
	enabled := []configv1.FeatureGateName{}
	Expect(fixtures.Create(ctx, k8s,
		infra,
		fixtures.FeatureGate(configv1.TechPreviewNoUpgrade, fixtures.ReleaseVersion, enabled, nil),
		fixtures.ClusterVersion(fixtures.ReleaseVersion, true),
		fixtures.MachineConfiguration(nil),
		fixtures.UserDataSecret("worker-user-data", fixtures.IgnitionStubV3),
		&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: kube.VSphereCredentialsNamespace, Name: kube.VSphereCredentialsSecret},
			StringData: map[string]string{vc.Server + ".username": fakecloud.VCenterUsername, vc.Server + ".password": fakecloud.VCenterPassword},
		},
	)).To(Succeed())
	DeferCleanup(func() {
		cleanCluster()
		Expect(k8s.DeleteAllOf(ctx, &corev1.ConfigMap{}, client.InNamespace(kube.MCONamespace))).To(Succeed())
		Expect(k8s.DeleteAllOf(ctx, &corev1.Secret{}, client.InNamespace(fixtures.MachineAPINamespace))).To(Succeed())
		Expect(k8s.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: kube.VSphereCredentialsNamespace, Name: kube.VSphereCredentialsSecret}})).To(Succeed())
		Expect(k8s.DeleteAllOf(ctx, &corev1.Event{}, client.InNamespace(fixtures.MachineAPINamespace))).To(Succeed())
	})
	return w
}

// serveStream publishes ova at the OVA server and a coreos-bootimages ConfigMap whose vmware
// artifact is it, with checksum sha256.
func (w *vsphereWorld) serveStream(ova []byte, sha256 string) {
	GinkgoHelper()
	location := w.ovas.Put("/rhcos-vmware.x86_64.ova", ova)
	s := fixtures.WithVSphereOVA(fixtures.Stream(), fixtures.StreamRelease, location, sha256)
	Expect(fixtures.Create(ctx, k8s, fixtures.BootImagesConfigMap(s, fixtures.ReleaseVersion))).To(Succeed())
}

// seedTemplate imports an OVA of release as template name in folder, as the installer did.
func (w *vsphereWorld) seedTemplate(folder, name, release string) {
	GinkgoHelper()
	Expect(w.vc.SeedTemplate(ctx, folder, name, release, "demo-x7k2p")).To(Succeed())
}

// start runs the operator against the simulator; failAt, when set, fails the swap once after
// that step.
func (w *vsphereWorld) start(failAt vsphere.SwapStep) *testenv.Manager {
	GinkgoHelper()
	mgr := startOperatorWithHooks(w.config(), w.hooks(failAt))
	DeferCleanup(func() { Expect(mgr.Stop()).To(Succeed()) })
	return mgr
}

// config is the operator's configuration against the simulator, with a registry of its own for
// the metrics (a registry takes them once), which w.metrics is from then on.
func (w *vsphereWorld) config() controllers.Options {
	w.metrics = prometheus.NewRegistry()
	return controllers.Options{CloudRootCAs: w.vc.RootCAs(), OVACacheDir: w.cacheDir, Metrics: w.metrics}
}

// hooks record the swap's steps; failAt, when set, fails the swap once after that step.
func (w *vsphereWorld) hooks(failAt vsphere.SwapStep) seams.Hooks {
	failed := false
	return seams.Hooks{AfterTemplateStep: func(name string) error {
		step := vsphere.SwapStep(name)
		w.mu.Lock()
		defer w.mu.Unlock()
		w.steps = append(w.steps, step)
		if step == failAt && !failed {
			failed = true
			w.interrupted, _ = w.vc.VMs(ctx, w.ws.Folder)
			return errors.New("interrupted after " + name)
		}
		return nil
	}}
}

func (w *vsphereWorld) swapSteps() []vsphere.SwapStep {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]vsphere.SwapStep(nil), w.steps...)
}

// folderVMs returns the VMs in folder.
func (w *vsphereWorld) folderVMs(folder string) func() []string {
	return func() []string {
		names, err := w.vc.VMs(ctx, folder)
		Expect(err).NotTo(HaveOccurred())
		return names
	}
}

// version returns the RHCOS version and tags of the VM at p.
func (w *vsphereWorld) version(p string) func() string {
	return func() string {
		vm, _, err := w.vc.VM(ctx, p)
		if err != nil {
			return err.Error()
		}
		return vm.Config.VAppConfig.GetVmConfigInfo().Product[0].Version
	}
}

// fullSwap are the steps of a swap of an outdated template.
var fullSwap = []vsphere.SwapStep{vsphere.SwapImport, vsphere.SwapRenameAway, vsphere.SwapRenameIn, vsphere.SwapDeleteReplaced}

func templateOf(name string) func() any { return func() any { return providerSpec(name)["template"] } }

var _ = Describe("vSphere MachineSet boot images, against vcsim", func() {
	var w *vsphereWorld
	BeforeEach(func() { w = newVSphereWorld() })

	It("imports the stream's OVA once, swaps it in for the outdated template and patches every MachineSet of the failure domain", func() {
		w.serveStream(w.newOVA, fakecloud.SHA256(w.newOVA))
		spec := fixtures.VSphereProviderSpecAt(installerTemplate, w.ws)
		Expect(fixtures.Create(ctx, k8s, fixtures.MachineSet("worker-a", spec), fixtures.MachineSet("worker-b", spec))).To(Succeed())
		before := getMachineSet("worker-a")
		w.start("")

		current := path.Join(w.ws.Folder, installerTemplate)
		Eventually(w.version(current)).Should(Equal(fixtures.StreamRelease))
		Eventually(condition(status.ConditionBootImageUpdateProgressing)).Should(HaveField("Message",
			"Reconciled 2 of 2 MAPI MachineSets (0 skipped) | Reconciled 0 of 0 ControlPlaneMachineSets (0 skipped)"))
		Expect(w.folderVMs(w.ws.Folder)()).To(ConsistOf(installerTemplate), "no temporary or replaced template is left")
		Expect(w.swapSteps()).To(Equal(fullSwap), "one import for both MachineSets")
		Expect(w.ovas.Downloads.Load()).To(BeEquivalentTo(1))

		vm, tags, err := w.vc.VM(ctx, current)
		Expect(err).NotTo(HaveOccurred())
		Expect(tags).To(ConsistOf("demo-x7k2p"))
		Expect(vm.Config.Template).To(BeTrue())

		// The MachineSet that imported records the attempt; the other found the template current.
		attempts := map[string]string{}
		for _, name := range []string{"worker-a", "worker-b"} {
			if a, ok := getMachineSet(name).Annotations[bootimage.AttemptsAnnotation]; ok {
				attempts[name] = a
			}
		}
		Expect(attempts).To(HaveLen(1))
		for name, a := range attempts {
			Expect(a).To(ContainSubstring(`"target":"` + installerTemplate + "@" + fixtures.StreamRelease + `","count":1`))
			Eventually(machineSetEvents(name)).Should(ContainElement(HavePrefix("BootImageUpdated: Updated boot image from " + installerTemplate + "@" + oldRHCOS)))
		}
		after := getMachineSet("worker-a")
		Expect(withoutImage(after, machineSetProviderSpec...)).To(Equal(withoutImage(before, machineSetProviderSpec...)), "nothing but the attempts annotation changed")
		Expect(after.Spec.Template.Spec.ProviderSpec.Value.Raw).To(MatchJSON(before.Spec.Template.Spec.ProviderSpec.Value.Raw), "the template keeps its name")
		Expect(os.ReadDir(w.cacheDir)).To(ConsistOf(HaveField("Name()", fakecloud.SHA256(w.newOVA)+".ova")))
	})

	It("skips, with the workspace in the reason, a MachineSet of no failure domain", func() {
		w.serveStream(w.newOVA, fakecloud.SHA256(w.newOVA))
		ws := w.ws
		ws.Datastore = "/DC0/datastore/other"
		ms := fixtures.MachineSet("elsewhere", fixtures.VSphereProviderSpecAt(installerTemplate, ws))
		Expect(fixtures.Create(ctx, k8s, ms)).To(Succeed())
		w.start("")

		Eventually(machineSetEvents("elsewhere")).Should(ConsistOf(
			"FailureDomainMismatch: Boot image update skipped: providerSpec workspace (server: 127.0.0.1, datacenter: DC0, datastore: /DC0/datastore/other, resourcePool: /DC0/host/DC0_C0/Resources) matches no vCenter and failure domain of Infrastructure cluster spec.platformSpec.vsphere"))
		Expect(resourceVersionOf("elsewhere")()).To(Equal(ms.ResourceVersion))
		Expect(w.version(path.Join(w.ws.Folder, installerTemplate))()).To(Equal(oldRHCOS))
	})

	It("never touches a template outside the workspace folder: it imports the cluster's own and points the MachineSet at it", func() {
		w.serveStream(w.newOVA, fakecloud.SHA256(w.newOVA))
		customer, err := w.vc.CreateFolder(ctx, "customer")
		Expect(err).NotTo(HaveOccurred())
		w.seedTemplate(customer, "golden", oldRHCOS)
		w.seedTemplate(customer, computedTemplate, oldRHCOS)
		Expect(fixtures.Create(ctx, k8s, fixtures.MachineSet("custom", fixtures.VSphereProviderSpecAt(path.Join(customer, "golden"), w.ws)))).To(Succeed())
		w.start("")

		Eventually(templateOf("custom")).Should(Equal(computedTemplate))
		Expect(w.version(path.Join(w.ws.Folder, computedTemplate))()).To(Equal(fixtures.StreamRelease))
		Expect(w.folderVMs(customer)()).To(ConsistOf("golden", computedTemplate))
		Expect(w.version(path.Join(customer, "golden"))()).To(Equal(oldRHCOS))
		Expect(w.version(path.Join(customer, computedTemplate))()).To(Equal(oldRHCOS))
		Expect(w.swapSteps()).To(Equal([]vsphere.SwapStep{vsphere.SwapImport, vsphere.SwapRenameIn}), "a new template: nothing to rename away or delete")
	})

	It("keeps a template per OS stream: a rhel-10 MachineSet gets a template of its own, never the rhel-9 one's name", func() {
		rhel10OVA := fakecloud.OVA(fixtures.RHEL10Release)
		streams := fixtures.Streams50()
		streams["rhel-9"] = fixtures.WithVSphereOVA(streams["rhel-9"], fixtures.StreamRelease, w.ovas.Put("/rhcos-9-vmware.x86_64.ova", w.newOVA), fakecloud.SHA256(w.newOVA))
		streams["rhel-10"] = fixtures.WithVSphereOVA(streams["rhel-10"], fixtures.RHEL10Release, w.ovas.Put("/rhcos-10-vmware.x86_64.ova", rhel10OVA), fakecloud.SHA256(rhel10OVA))
		Expect(fixtures.Create(ctx, k8s, fixtures.BootImagesConfigMap50(streams, fixtures.ReleaseVersion))).To(Succeed())
		spec := fixtures.VSphereProviderSpecAt(installerTemplate, w.ws)
		rhel9, rhel10 := fixtures.MachineSet("rhel9", spec), fixtures.MachineSet("rhel10", spec)
		fixtures.Labelled("rhel-9", &rhel9.Labels, &rhel9.Spec.Template.Labels)
		fixtures.Labelled("rhel-10", &rhel10.Labels, &rhel10.Spec.Template.Labels)
		Expect(fixtures.Create(ctx, k8s, rhel9, rhel10)).To(Succeed())
		w.start("")

		rhel10Template := "demo-x7k2p-rhcos-rhel-10-fd1"
		Eventually(templateOf("rhel10")).Should(Equal(rhel10Template))
		Eventually(w.version(path.Join(w.ws.Folder, rhel10Template))).Should(Equal(fixtures.RHEL10Release))
		Eventually(w.version(path.Join(w.ws.Folder, installerTemplate))).Should(Equal(fixtures.StreamRelease), "the rhel-9 template takes the rhel-9 OVA")
		Expect(templateOf("rhel9")()).To(Equal(installerTemplate))
		Eventually(condition(status.ConditionBootImageUpdateProgressing)).Should(HaveField("Message",
			"Reconciled 2 of 2 MAPI MachineSets (0 skipped) | Reconciled 0 of 0 ControlPlaneMachineSets (0 skipped)"))
		Expect(w.folderVMs(w.ws.Folder)()).To(ConsistOf(installerTemplate, rhel10Template))
	})

	It("detects a hot loop by the release: a template reverted after three imports is left alone", func() {
		w.serveStream(w.newOVA, fakecloud.SHA256(w.newOVA))
		Expect(fixtures.Create(ctx, k8s, fixtures.MachineSet("worker-a", fixtures.VSphereProviderSpecAt(installerTemplate, w.ws)))).To(Succeed())
		current := path.Join(w.ws.Folder, installerTemplate)
		sessions, err := w.vc.Sessions(ctx, fakecloud.VCenterUsername)
		Expect(err).NotTo(HaveOccurred())
		for i := range bootimage.HotLoopLimit {
			// The operator imports, and restarts: the count is kept in the MachineSet.
			mgr := w.start("")
			Eventually(func() string { return getMachineSet("worker-a").Annotations[bootimage.AttemptsAnnotation] }).Should(ContainSubstring(fmt.Sprintf(`"count":%d`, i+1)))
			Expect(mgr.Stop()).To(Succeed())
			Expect(w.vc.Sessions(ctx, fakecloud.VCenterUsername)).To(Equal(sessions), "the operator logged out of vCenter on shutdown")
			Expect(w.version(current)()).To(Equal(fixtures.StreamRelease))
			// Someone puts the old template back.
			Expect(w.vc.Destroy(ctx, current)).To(Succeed())
			w.seedTemplate(w.ws.Folder, installerTemplate, oldRHCOS)
		}
		w.start("")
		Eventually(machineSetEvents("worker-a")).Should(ContainElement(HavePrefix("HotLoopDetected: Boot image update failed: refusing to reconcile machineset worker-a, hot loop detected")))
		Expect(w.version(current)()).To(Equal(oldRHCOS))
		Expect(w.swapSteps()).To(HaveLen(4 * bootimage.HotLoopLimit))
	})

	DescribeTable("recovers a swap interrupted after each step",
		func(step vsphere.SwapStep, interrupted func(importing, replaced string) []string, reported bool) {
			w.serveStream(w.newOVA, fakecloud.SHA256(w.newOVA))
			Expect(fixtures.Create(ctx, k8s, fixtures.MachineSet("worker-a", fixtures.VSphereProviderSpecAt(installerTemplate, w.ws)))).To(Succeed())
			w.start(step)
			Eventually(w.swapSteps).Should(ContainElement(step))
			w.mu.Lock()
			Expect(w.interrupted).To(ConsistOf(interrupted(vsphere.SwapNames(installerTemplate))), "vCenter as the interruption left it")
			w.mu.Unlock()

			Eventually(condition(status.ConditionBootImageUpdateProgressing)).Should(HaveField("Message",
				"Reconciled 1 of 1 MAPI MachineSets (0 skipped) | Reconciled 0 of 0 ControlPlaneMachineSets (0 skipped)"))
			Eventually(w.version(path.Join(w.ws.Folder, installerTemplate))).Should(Equal(fixtures.StreamRelease))
			Eventually(w.folderVMs(w.ws.Folder)).Should(ConsistOf(installerTemplate))
			Expect(w.swapSteps()).To(Equal(fullSwap), "the next run takes the steps left, and only those")
			failed := HavePrefix("TemplateImportFailed: Boot image update failed: importing template " + installerTemplate)
			if reported {
				Eventually(machineSetEvents("worker-a")).Should(ContainElement(failed))
			} else {
				Expect(machineSetEvents("worker-a")()).NotTo(ContainElement(failed), "decided again, the template is current: nothing failed that matters")
			}
		},
		Entry("imported: the verified import is reused", vsphere.SwapImport,
			func(importing, _ string) []string { return []string{installerTemplate, importing} }, true),
		Entry("renamed away: the verified import is renamed in", vsphere.SwapRenameAway,
			func(importing, replaced string) []string { return []string{replaced, importing} }, true),
		Entry("renamed in: the replaced template is deleted", vsphere.SwapRenameIn,
			func(_, replaced string) []string { return []string{installerTemplate, replaced} }, true),
		Entry("deleted: nothing left to do", vsphere.SwapDeleteReplaced,
			func(string, string) []string { return []string{installerTemplate} }, false),
	)

	It("refuses a corrupt OVA download, naming both checksums, and keeps nothing of it", func() {
		corrupt := append([]byte(nil), w.newOVA...)
		corrupt[len(corrupt)/2] ^= 0xff
		want := fakecloud.SHA256(w.newOVA)
		w.serveStream(corrupt, want)
		ms := fixtures.MachineSet("worker-a", fixtures.VSphereProviderSpecAt(installerTemplate, w.ws))
		Expect(fixtures.Create(ctx, k8s, ms)).To(Succeed())
		w.start("")

		Eventually(machineSetEvents("worker-a")).Should(ContainElement(And(
			HavePrefix("TemplateImportFailed: Boot image update failed: importing template "+installerTemplate),
			ContainSubstring("sha256 "+fakecloud.SHA256(corrupt)+", but the stream says "+want+": refusing it"))))
		Eventually(condition(status.ConditionBootImageUpdateDegraded)).Should(HaveField("Status", metav1.ConditionTrue))
		Expect(w.folderVMs(w.ws.Folder)()).To(ConsistOf(installerTemplate))
		Expect(w.version(path.Join(w.ws.Folder, installerTemplate))()).To(Equal(oldRHCOS))
		Expect(filepath.Glob(filepath.Join(w.cacheDir, "*.ova"))).To(BeEmpty(), "a corrupt download never enters the cache")
		Expect(resourceVersionOf("worker-a")()).To(Equal(ms.ResourceVersion))
	})
})

// startElected runs the operator as its command does: holding a Lease released on shutdown, with
// the command's grace period, past which the manager's Start fails. stop cancels it and returns
// Start's error.
func startElected(opts controllers.Options) (stop func() error) {
	GinkgoHelper()
	opts.ReleaseVersion = fixtures.ReleaseVersion
	grace := 30 * time.Second
	mgrOpts := testenv.ManagerOptions(seams.Hooks{})
	mgrOpts.LeaderElection = true
	mgrOpts.LeaderElectionID = electedLease
	mgrOpts.LeaderElectionNamespace = kube.MCONamespace
	mgrOpts.LeaderElectionReleaseOnCancel = true
	mgrOpts.GracefulShutdownTimeout = &grace
	mgr, err := ctrl.NewManager(env.Config, mgrOpts)
	Expect(err).NotTo(HaveOccurred())
	Expect(controllers.AddToManager(mgr, opts)).To(Succeed())
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(runCtx) }()
	var once sync.Once
	var result error
	stop = func() error {
		once.Do(func() {
			cancel()
			result = <-done
		})
		return result
	}
	DeferCleanup(func() { _ = stop() })
	return stop
}

const electedLease = "bootimage-operator-vsphere"

// decided returns how many objects the operator's current decision is action and reason for, as
// it exports them (bootimage_decisions); "" counts every action or reason.
func decided(reg prometheus.Gatherer, action, reason string) func() float64 {
	return func() float64 {
		families, err := reg.Gather()
		Expect(err).NotTo(HaveOccurred())
		n := 0.0
		for _, f := range families {
			if f.GetName() != "bootimage_decisions" {
				continue
			}
			for _, m := range f.GetMetric() {
				labels := map[string]string{}
				for _, l := range m.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				if labels["kind"] == "MachineSet" && (action == "" || labels["action"] == action) && (reason == "" || labels["reason"] == reason) {
					n += m.GetGauge().GetValue()
				}
			}
		}
		return n
	}
}

func leaseHolder() string {
	lease := &coordinationv1.Lease{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: kube.MCONamespace, Name: electedLease}, lease); err != nil || lease.Spec.HolderIdentity == nil {
		return ""
	}
	return *lease.Spec.HolderIdentity
}

var _ = Describe("vSphere imports while the OVA mirror stalls", func() {
	It("hold no worker: other MachineSets of both failure domains are decided, shutdown ends within the grace period releasing the Lease, and a restart finishes the import", func() {
		w := newVSphereWorld()
		release := w.ovas.Stall()
		DeferCleanup(release)
		const currentTemplate, fd2Template = "demo-x7k2p-rhcos-current", "demo-x7k2p-rhcos-fd2"
		pool, err := w.vc.CreateResourcePool(ctx, "fd2")
		Expect(err).NotTo(HaveOccurred())
		ws2 := w.ws
		ws2.ResourcePool = pool
		infra := &configv1.Infrastructure{}
		Expect(k8s.Get(ctx, client.ObjectKey{Name: "cluster"}, infra)).To(Succeed())
		fd2 := infra.Spec.PlatformSpec.VSphere.FailureDomains[0]
		fd2.Name, fd2.Zone, fd2.Topology.ResourcePool = "fd2", "zone-b", pool
		infra.Spec.PlatformSpec.VSphere.FailureDomains = append(infra.Spec.PlatformSpec.VSphere.FailureDomains, fd2)
		Expect(k8s.Update(ctx, infra)).To(Succeed())
		w.seedTemplate(w.ws.Folder, currentTemplate, fixtures.StreamRelease)
		w.seedTemplate(w.ws.Folder, fd2Template, fixtures.StreamRelease)
		w.serveStream(w.newOVA, fakecloud.SHA256(w.newOVA))

		// More MachineSets waiting for the import than the controller has workers.
		var objs []client.Object
		outdated := fixtures.VSphereProviderSpecAt(installerTemplate, w.ws)
		for i := range 10 {
			objs = append(objs, fixtures.MachineSet(fmt.Sprintf("waiting-%d", i), outdated))
		}
		objs = append(objs,
			fixtures.MachineSet("current-fd1", fixtures.VSphereProviderSpecAt(currentTemplate, w.ws)),
			fixtures.MachineSet("current-fd2", fixtures.VSphereProviderSpecAt(fd2Template, ws2)))
		Expect(fixtures.Create(ctx, k8s, objs...)).To(Succeed())
		waiting := getMachineSet("waiting-0")
		sessions, err := w.vc.Sessions(ctx, fakecloud.VCenterUsername)
		Expect(err).NotTo(HaveOccurred())

		stop := startElected(w.config())
		Eventually(leaseHolder).ShouldNot(BeEmpty())
		Eventually(w.ovas.Stalled.Load).Should(BeEquivalentTo(1))
		Eventually(decided(w.metrics, "NoChange", "UpToDate")).Should(BeEquivalentTo(2))

		By("deciding MachineSets created while the download stalls, in both failure domains")
		Expect(fixtures.Create(ctx, k8s,
			fixtures.MachineSet("late-fd1", fixtures.VSphereProviderSpecAt(currentTemplate, w.ws)),
			fixtures.MachineSet("late-fd2", fixtures.VSphereProviderSpecAt(fd2Template, ws2)),
			fixtures.MachineSet("late-bad", fixtures.VSphereProviderSpecAt("", w.ws)),
		)).To(Succeed())
		Eventually(decided(w.metrics, "NoChange", "UpToDate")).Should(BeEquivalentTo(4))
		Eventually(machineSetEvents("late-bad")).Should(ConsistOf(HavePrefix("InvalidProviderSpec: ")))
		Eventually(condition(status.ConditionBootImageUpdateDegraded)).Should(HaveField("Message", ContainSubstring("MachineSet openshift-machine-api/late-bad: InvalidProviderSpec")), "the status controller keeps writing")
		Expect(decided(w.metrics, "", "")()).To(BeEquivalentTo(5), "the ten waiting for the import are not decided yet")
		Expect(condition(status.ConditionBootImageUpdateProgressing)()).To(HaveField("Status", metav1.ConditionTrue), "while they wait")
		Expect(w.ovas.Downloads.Load()).To(BeEquivalentTo(1), "one import for the ten MachineSets")
		Expect(w.ovas.Stalled.Load()).To(BeEquivalentTo(1))

		By("shutting down within the grace period, the stalled import cancelled and the Lease released")
		Expect(stop()).To(Succeed())
		Expect(leaseHolder()).To(BeEmpty())
		Expect(w.ovas.Abandoned.Load()).To(BeEquivalentTo(1))
		Expect(w.vc.Sessions(ctx, fakecloud.VCenterUsername)).To(Equal(sessions), "logged out of vCenter")
		Expect(resourceVersionOf("waiting-0")()).To(Equal(waiting.ResourceVersion))
		Expect(w.folderVMs(w.ws.Folder)()).To(ConsistOf(installerTemplate, currentTemplate, fd2Template))
		Expect(filepath.Glob(filepath.Join(w.cacheDir, "*"))).To(BeEmpty(), "nothing of the partial download is kept")

		By("finishing the import after a restart, once the mirror answers")
		release()
		w.start("")
		Eventually(decided(w.metrics, "NoChange", "UpToDate")).Should(BeEquivalentTo(14))
		Expect(w.version(path.Join(w.ws.Folder, installerTemplate))()).To(Equal(fixtures.StreamRelease))
		Expect(w.swapSteps()).To(Equal(fullSwap))
	})
})

var _ = Describe("The shipped RBAC on vSphere", func() {
	It("lets the operator read Secret kube-system/vsphere-creds and no other Secret there", func() {
		rbac, err := fixtures.ManifestObjects(manifests.RBACFile)
		Expect(err).NotTo(HaveOccurred())
		for _, obj := range rbac {
			Expect(k8s.Create(ctx, obj)).To(Succeed())
			DeferCleanup(k8s.Delete, ctx, obj)
		}
		for _, name := range []string{kube.VSphereCredentialsSecret, "other-secret"} {
			secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: kube.VSphereCredentialsNamespace, Name: name}}
			Expect(k8s.Create(ctx, secret)).To(Succeed())
			DeferCleanup(k8s.Delete, ctx, secret)
		}
		cfg := rest.CopyConfig(env.Config)
		cfg.Impersonate.UserName = "system:serviceaccount:openshift-machine-config-operator:bootimage-operator"
		asOperator, err := client.New(cfg, client.Options{Scheme: env.Scheme})
		Expect(err).NotTo(HaveOccurred())

		key := func(name string) client.ObjectKey {
			return client.ObjectKey{Namespace: kube.VSphereCredentialsNamespace, Name: name}
		}
		// RBAC changes reach the authorizer's cache shortly after they are written.
		Eventually(func() error { return asOperator.Get(ctx, key(kube.VSphereCredentialsSecret), &corev1.Secret{}) }).Should(Succeed())
		Expect(apierrors.IsForbidden(asOperator.Get(ctx, key("other-secret"), &corev1.Secret{}))).To(BeTrue())
		Expect(apierrors.IsForbidden(asOperator.List(ctx, &corev1.SecretList{}, client.InNamespace(kube.VSphereCredentialsNamespace)))).To(BeTrue())
		Expect(apierrors.IsNotFound(asOperator.Get(ctx, key(kube.InstallConfigConfigMap), &corev1.ConfigMap{}))).To(BeTrue(), "the install config may be read")
		Expect(apierrors.IsForbidden(asOperator.Get(ctx, key("other-config"), &corev1.ConfigMap{}))).To(BeTrue())
	})
})
