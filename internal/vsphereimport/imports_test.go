package vsphereimport

import (
	"context"
	"errors"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/bootimage/vsphere"
	"github.com/bootimage-operator/bootimage-operator/internal/kube"
)

// gatedStore is vCenter as a map of template name to template whose imports wait for a gate (or
// the import's context) and fail with failWith when set.
type gatedStore struct {
	mu        sync.Mutex
	templates map[string]vsphere.Template
	release   string
	gate      chan struct{}
	imports   int
	failWith  error
}

func (m *gatedStore) Template(_ context.Context, _ vsphere.Location, name string) (*vsphere.Template, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if t, ok := m.templates[name]; ok {
		return &t, nil
	}
	return nil, nil
}

func (m *gatedStore) ImportTemplate(ctx context.Context, _ vsphere.Import, name, _, diskType string) error {
	m.mu.Lock()
	m.imports++
	gate, failWith := m.gate, m.failWith
	m.mu.Unlock()
	select {
	case <-gate:
	case <-ctx.Done():
		return ctx.Err()
	}
	if failWith != nil {
		return failWith
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.templates[name] = vsphere.Template{Version: m.release, DiskType: diskType, IsTemplate: true}
	return nil
}

func (m *gatedStore) RenameTemplate(_ context.Context, _ vsphere.Location, from, to string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.templates[to] = m.templates[from]
	delete(m.templates, from)
	return nil
}

func (m *gatedStore) DestroyTemplate(_ context.Context, _ vsphere.Location, name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.templates, name)
	return nil
}

func (m *gatedStore) importCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.imports
}

var _ = Describe("Template imports, off the reconcile workers", func() {
	const release = "9.6.1"
	var store *gatedStore
	var imports *Imports
	var triggered chan event.GenericEvent
	var stop context.CancelFunc
	var stopped chan error
	a := Waiter{"MachineSet", types.NamespacedName{Namespace: "openshift-machine-api", Name: "worker-a"}}
	b := Waiter{"MachineSet", types.NamespacedName{Namespace: "openshift-machine-api", Name: "worker-b"}}
	d := bootimage.Decision{Kind: "MachineSet", Action: bootimage.Update, Target: "t@" + release,
		Prepare: &vsphere.Import{Name: "t", Release: release}}

	BeforeEach(func() {
		store = &gatedStore{templates: map[string]vsphere.Template{"t": {Version: "9.4.1", IsTemplate: true}}, release: release, gate: make(chan struct{})}
		imports = &Imports{Swapper: vsphere.Swapper{
			Store: store,
			OVA:   func(context.Context, string, string) (string, error) { return "/cache/rhcos.ova", nil },
		}}
		imports.Source("MachineSet")
		triggered = imports.sources["MachineSet"]
		var ctx context.Context
		ctx, stop = context.WithCancel(context.Background())
		stopped = make(chan error, 1)
		go func() { stopped <- imports.Start(ctx) }()
		DeferCleanup(func() {
			stop()
			Eventually(stopped).Should(Receive(BeNil()))
		})
	})
	name := func(e event.GenericEvent) string { return e.Object.GetName() }
	importedFor := func(w Waiter) *bootimage.Decision {
		if d, ok := imports.Imported(w); ok {
			return &d
		}
		return nil
	}

	It("imports a template once for every MachineSet that asks, triggers them all, and gives the import to the first", func() {
		Expect(imports.Request(a, d)).To(Equal(State{}))
		Expect(imports.Request(b, d)).To(Equal(State{}))
		Eventually(store.importCount).Should(Equal(1))
		Expect(importedFor(a)).To(BeNil(), "not before it is made")

		close(store.gate)
		Eventually(triggered).Should(Receive(WithTransform(name, BeElementOf("worker-a", "worker-b"))))
		Eventually(triggered).Should(Receive(WithTransform(name, BeElementOf("worker-a", "worker-b"))))
		Expect(importedFor(a)).To(HaveValue(Equal(d)))
		Expect(importedFor(b)).To(BeNil(), "worker-b finds the template current")
		imports.Recorded(a)
		Expect(importedFor(a)).To(BeNil())
		Expect(store.importCount()).To(Equal(1))
	})

	It("tells every MachineSet of a failed import the error until its retry is due", func() {
		store.failWith = errors.New("datastore full")
		close(store.gate)
		imports.Request(a, d)
		Eventually(triggered).Should(Receive(WithTransform(name, Equal("worker-a"))))
		Expect(imports.Request(a, d).Err).To(MatchError("datastore full"), "the waiter hears of it")
		state := imports.Request(b, d)
		Expect(state.Err).To(MatchError(ContainSubstring("datastore full")))
		Expect(state.RetryIn).To(BeNumerically(">", 0))
		Expect(store.importCount()).To(Equal(1))

		store.mu.Lock()
		store.failWith = nil
		store.mu.Unlock()
		Eventually(func() error { return imports.Request(b, d).Err }).Should(Succeed(), "retried once the backoff passed")
		Eventually(triggered).Should(Receive(WithTransform(name, Equal("worker-b"))))
		Expect(importedFor(b)).To(HaveValue(Equal(d)))
		Expect(store.importCount()).To(Equal(2))
	})

	It("cancels an import under way when it stops", func() {
		imports.Request(a, d)
		Eventually(store.importCount).Should(Equal(1))
		stop()
		Eventually(stopped).Should(Receive(BeNil()))
		stopped <- nil // for the cleanup
		Expect(store.templates).To(HaveKeyWithValue("t", HaveField("Version", "9.4.1")))
	})

	It("polls for kinds no import end can trigger", func() {
		cpms := Waiter{"ControlPlaneMachineSet", types.NamespacedName{Namespace: "openshift-machine-api", Name: "cluster"}}
		Expect(imports.Request(cpms, d)).To(Equal(State{Poll: importPoll}))
	})
})

var _ = Describe("A new failure domain's disk provisioning", func() {
	It("is the install config's, or the datastore's policy without one", func() {
		installConfig := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: kube.VSphereCredentialsNamespace, Name: kube.InstallConfigConfigMap},
			Data:       map[string]string{"install-config": "platform:\n  vsphere:\n    diskType: thin\n"},
		}
		Expect(installConfigDiskType(context.Background(), fake.NewClientBuilder().WithObjects(installConfig).Build())).To(Equal("thin"))
		Expect(installConfigDiskType(context.Background(), fake.NewClientBuilder().Build())).To(BeEmpty())
		installConfig.Data["install-config"] = "platform: ["
		_, err := installConfigDiskType(context.Background(), fake.NewClientBuilder().WithObjects(installConfig).Build())
		Expect(err).To(MatchError(ContainSubstring("ConfigMap kube-system/cluster-config-v1 key install-config")))
	})
})
