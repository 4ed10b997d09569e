package controller_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	controller "github.com/bootimage-operator/bootimage-operator/refreshcontroller"
	"github.com/bootimage-operator/bootimage-operator/refreshcontroller/daemonsim"
)

// hcpNamespace is the hosted control plane namespace on the management side. One envtest
// cluster plays both the management and the guest cluster.
const hcpNamespace = "clusters-demo"

var (
	testEnv *envtest.Environment
	k8s     client.Client // direct: what the test reads is the API server's state
	daemon  *daemonsim.Daemon
	watched *recorder
	stop    context.CancelFunc
	mgrDone chan error
)

func TestRefreshController(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Refresh controller")
}

// assetsDir is KUBEBUILDER_ASSETS, or the repository's bin/k8s that `make k8s` fills.
func assetsDir() string {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir
	}
	dir, err := filepath.Abs(filepath.Join("..", "bin", "k8s"))
	Expect(err).NotTo(HaveOccurred())
	return dir
}

// capiCRDs are the MachineDeployment, MachineSet and Machine CRDs of the cluster-api version
// hack/tools/capi-crds pins, read from the Go module cache (downloaded through the module proxy
// when missing), as the root module's manifests.CAPICRDPaths reads them.
func capiCRDs() []string {
	tools := filepath.Join("..", "hack", "tools", "capi-crds")
	out, err := exec.Command("go", "-C", tools, "list", "-m", "-f", "{{.Version}}", "sigs.k8s.io/cluster-api").Output()
	Expect(err).NotTo(HaveOccurred(), "reading the cluster-api version %s pins", tools)
	version := string(out[:len(out)-1])
	out, err = exec.Command("go", "-C", tools, "mod", "download", "-json", "sigs.k8s.io/cluster-api@"+version).Output()
	Expect(err).NotTo(HaveOccurred(), "downloading sigs.k8s.io/cluster-api@%s", version)
	var mod struct{ Dir string }
	Expect(json.Unmarshal(out, &mod)).To(Succeed())
	bases := filepath.Join(mod.Dir, "config", "crd", "bases")
	return []string{filepath.Join(bases, "cluster.x-k8s.io_machinedeployments.yaml"), filepath.Join(bases, "cluster.x-k8s.io_machinesets.yaml"),
		filepath.Join(bases, "cluster.x-k8s.io_machines.yaml")}
}

var _ = BeforeSuite(func() {
	SetDefaultEventuallyTimeout(30 * time.Second)
	SetDefaultEventuallyPollingInterval(20 * time.Millisecond)
	SetDefaultConsistentlyDuration(300 * time.Millisecond)
	ctrl.SetLogger(funcr.New(func(prefix, args string) {
		noisy.see(args)
		fmt.Fprintln(GinkgoWriter, prefix, args)
	}, funcr.Options{}))

	assets := assetsDir()
	_, err := os.Stat(filepath.Join(assets, "kube-apiserver"))
	Expect(err).NotTo(HaveOccurred(), "no kube-apiserver in %s: run `make k8s` from the repository root, or set KUBEBUILDER_ASSETS", assets)
	testEnv = &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     append([]string{filepath.Join("testdata", "nodepool-crd.yaml")}, capiCRDs()...),
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := testEnv.Start()
	Expect(err).NotTo(HaveOccurred())
	k8s, err = client.New(cfg, client.Options{Scheme: scheme.Scheme})
	Expect(err).NotTo(HaveOccurred())
	Expect(k8s.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: hcpNamespace}})).To(Succeed())

	var ctx context.Context
	ctx, stop = context.WithCancel(context.Background())
	watched = startRecorder(ctx, cfg)

	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	Expect(err).NotTo(HaveOccurred())
	root, err := os.MkdirTemp("", "daemonsim-")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(os.RemoveAll, root)
	daemon = &daemonsim.Daemon{Client: mgr.GetClient(), Root: root}
	Expect(daemon.SetupWithManager(mgr)).To(Succeed())
	// The guest is read uncached, as cmd/refresh-controller does: the plan must see its own
	// writes, or a stale cache starts more nodes than maxUnavailable.
	guest, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
	Expect(err).NotTo(HaveOccurred())
	r := &controller.Reconciler{Management: mgr.GetClient(), Namespace: hcpNamespace, Guest: guest, DaemonImage: "quay.io/example/machine-config-daemon:test",
		ClockSkew: clockSkew}
	Expect(r.SetupWithManager(mgr, mgr, mgr)).To(Succeed())
	mgrDone = make(chan error, 1)
	go func() {
		defer GinkgoRecover()
		mgrDone <- mgr.Start(ctx)
	}()
})

var _ = AfterSuite(func() {
	if stop != nil {
		stop()
		Eventually(mgrDone).Should(Receive(Not(HaveOccurred())))
	}
	if testEnv != nil {
		Expect(testEnv.Stop()).To(Succeed())
	}
})

// noisyLogs counts the log lines an operator should never see from a healthy refresh: a write
// conflict reported as a reconciler error, and controller-runtime's warning about a result
// returned with an error.
type noisyLogs struct {
	mu    sync.Mutex
	lines []string
}

var noisy = &noisyLogs{}

func (n *noisyLogs) see(line string) {
	// The controller's lines only: the daemon stand-in retries its own conflicts.
	if !strings.Contains(line, `"controller"="configrefresh"`) {
		return
	}
	if strings.Contains(line, "Reconciler error") && strings.Contains(line, "the object has been modified") ||
		strings.Contains(line, "Reconciler returned both a result") {
		n.mu.Lock()
		defer n.mu.Unlock()
		n.lines = append(n.lines, line)
	}
}

// Take returns the lines seen since the last call.
func (n *noisyLogs) Take() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	l := n.lines
	n.lines = nil
	return l
}

// snapshot is a NodePool's three ConfigRefresh conditions at one event.
type snapshot struct {
	Progressing, Complete, Degraded condition
}

type condition struct{ Status, Reason, Message string }

func (s snapshot) String() string {
	return fmt.Sprintf("Progressing=%s/%s Complete=%s/%s Degraded=%s/%s (%s; %s)", s.Progressing.Status, s.Progressing.Reason,
		s.Complete.Status, s.Complete.Reason, s.Degraded.Status, s.Degraded.Reason, s.Progressing.Message, s.Degraded.Message)
}

// recorder watches the API server and checks the invariants on every daemon pod event: never
// two daemon pods on one node, never more pods (nodes in flight, a finished pod until removed
// included) in a pool's upgrade namespace than the pool's maxUnavailable. It also keeps each
// NodePool's condition history and counts the pods created per upgrade namespace.
type recorder struct {
	mu             sync.Mutex
	maxUnavailable map[string]int // by upgrade namespace
	pods           map[string]*corev1.Pod
	created        map[string]int
	peak           map[string]int
	violations     []string
	history        map[string][]snapshot
}

func startRecorder(ctx context.Context, cfg *rest.Config) *recorder {
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme.Scheme})
	Expect(err).NotTo(HaveOccurred())
	r := &recorder{maxUnavailable: map[string]int{}, pods: map[string]*corev1.Pod{}, created: map[string]int{},
		peak: map[string]int{}, history: map[string][]snapshot{}}
	pools := &unstructured.UnstructuredList{}
	pools.SetGroupVersionKind(controller.NodePoolGVK.GroupVersion().WithKind("NodePoolList"))
	// Started before any object exists, each watch sees every event from the first.
	podWatch, err := c.Watch(ctx, &corev1.PodList{})
	Expect(err).NotTo(HaveOccurred())
	poolWatch, err := c.Watch(ctx, pools)
	Expect(err).NotTo(HaveOccurred())
	go func() {
		defer GinkgoRecover()
		for ev := range podWatch.ResultChan() {
			if p, ok := ev.Object.(*corev1.Pod); ok {
				r.pod(ev.Type, p)
			}
		}
	}()
	go func() {
		defer GinkgoRecover()
		for ev := range poolWatch.ResultChan() {
			if u, ok := ev.Object.(*unstructured.Unstructured); ok {
				r.pool(u)
			}
		}
	}()
	return r
}

func (r *recorder) pod(t watch.EventType, p *corev1.Pod) {
	r.mu.Lock()
	defer r.mu.Unlock()
	key := p.Namespace + "/" + p.Name
	switch t {
	case watch.Added:
		r.created[p.Namespace]++
		r.pods[key] = p
	case watch.Modified:
		r.pods[key] = p
	case watch.Deleted:
		delete(r.pods, key)
	}
	onNode := map[string][]string{}
	inNamespace := map[string]int{}
	for k, p := range r.pods {
		onNode[p.Spec.NodeName] = append(onNode[p.Spec.NodeName], k)
		inNamespace[p.Namespace]++
	}
	for node, pods := range onNode {
		if len(pods) > 1 {
			r.violations = append(r.violations, fmt.Sprintf("two daemon pods on node %s: %v", node, pods))
		}
	}
	for ns, n := range inNamespace {
		r.peak[ns] = max(r.peak[ns], n)
		if limit := r.maxUnavailable[ns]; n > limit {
			r.violations = append(r.violations, fmt.Sprintf("%d nodes in flight in %s, maxUnavailable %d", n, ns, limit))
		}
	}
}

func (r *recorder) pool(u *unstructured.Unstructured) {
	raw, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	var s snapshot
	for _, c := range raw {
		m, _ := c.(map[string]any)
		cond := condition{Status: fmt.Sprint(m["status"]), Reason: fmt.Sprint(m["reason"]), Message: fmt.Sprint(m["message"])}
		switch m["type"] {
		case "ConfigRefreshProgressing":
			s.Progressing = cond
		case "ConfigRefreshComplete":
			s.Complete = cond
		case "ConfigRefreshDegraded":
			s.Degraded = cond
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.history[u.GetName()]
	if len(h) == 0 || h[len(h)-1] != s {
		r.history[u.GetName()] = append(h, s)
	}
}

func (r *recorder) limit(namespace string, maxUnavailable int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.maxUnavailable[namespace] = maxUnavailable
}

// Violations returns the invariants broken since the last call.
func (r *recorder) Violations() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	v := r.violations
	r.violations = nil
	return v
}

func (r *recorder) Created(namespace string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.created[namespace]
}

func (r *recorder) Peak(namespace string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.peak[namespace]
}

// History returns a NodePool's condition snapshots from index from on, and the next index.
func (r *recorder) History(pool string, from int) ([]snapshot, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.history[pool]
	return append([]snapshot(nil), h[min(from, len(h)):]...), len(h)
}
