// Package fencing runs two leader-elected operators on one API server and stalls the first one's
// lease renewals, as a paused process or a proxy holding its renew requests would, while one of
// its writes is held on the way out: once another identity holds the Lease, no write of the
// first may have landed, the held one included.
package fencing_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/controllers"
	"github.com/bootimage-operator/bootimage-operator/internal/kube"
	"github.com/bootimage-operator/bootimage-operator/internal/seams"
	"github.com/bootimage-operator/bootimage-operator/leader"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
	"github.com/bootimage-operator/bootimage-operator/test/testenv"
)

// Compressed leader election: a 4s lease renewed every 500ms, fenced 1s before it ends.
const (
	leaseDuration = 4 * time.Second
	renewDeadline = 3 * time.Second
	retryPeriod   = 500 * time.Millisecond
	skewMargin    = time.Second
	leaseName     = "bootimage-operator"
	leaseNS       = kube.MCONamespace
)

var (
	env *testenv.Env
	ctx = context.Background()
)

func TestFencing(t *testing.T) {
	testenv.RunSpecs(t, "a deposed leader makes no write", testenv.Waits{Timeout: 60 * time.Second, Polling: 100 * time.Millisecond})
}

var _ = BeforeSuite(func() {
	testenv.LogToGinkgo(1)
	env = testenv.StartForSpecs(testenv.Options{})
	Expect(fixtures.Create(ctx, env.Client, fixtures.GCPCluster()...)).To(Succeed())
})

// stall holds every request while set, ignoring the request's context as a paused process
// does: the renew loop waits in its request and never learns its deadline passed.
type stall struct {
	next    http.RoundTripper
	stalled atomic.Bool
	thaw    chan struct{}
	once    sync.Once
	// leaseWrites records the Lease writes the API server accepted after since is set.
	leaseWrites writes
}

func (s *stall) RoundTrip(req *http.Request) (*http.Response, error) {
	if s.stalled.Load() {
		<-s.thaw
	}
	resp, err := s.next.RoundTrip(req)
	if err == nil && resp.StatusCode < 300 {
		s.leaseWrites.record(req)
	}
	return resp, err
}

// resume lets the held requests go, as a paused process resumed.
func (s *stall) resume() {
	s.once.Do(func() {
		s.stalled.Store(false)
		close(s.thaw)
	})
}

// writes sits where the network is, after the fence's last check: while holding, it holds each
// write until released or until the request's context ends, as a slow link or a process paused
// mid-write would; it records the write requests sent on after since is set.
type writes struct {
	next    http.RoundTripper
	since   atomic.Pointer[time.Time]
	holding atomic.Bool
	held    chan string
	release chan struct{}
	mu      sync.Mutex
	sent    []string
}

func (w *writes) RoundTrip(req *http.Request) (*http.Response, error) {
	// Events are not fenced (the recorder has its own client); every other write is.
	if strings.Contains(req.URL.Path, "/events") || req.Method == http.MethodGet {
		return w.next.RoundTrip(req)
	}
	if w.holding.Load() {
		select {
		case w.held <- req.Method + " " + req.URL.Path:
		default:
		}
		select {
		case <-w.release:
		case <-req.Context().Done():
			return nil, context.Cause(req.Context())
		}
	}
	w.record(req)
	return w.next.RoundTrip(req)
}

func (w *writes) record(req *http.Request) {
	if t := w.since.Load(); t != nil && req.Method != http.MethodGet {
		w.mu.Lock()
		w.sent = append(w.sent, fmt.Sprintf("%s %s at +%s", req.Method, req.URL.Path, time.Since(*t).Round(time.Millisecond)))
		w.mu.Unlock()
	}
}

func (w *writes) list() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.sent...)
}

// replica is one operator process: a manager fenced as cmd/bootimage-operator fences it.
type replica struct {
	mgr    ctrl.Manager
	fence  *leader.Fence
	stall  *stall
	writes *writes
	err    error
	ended  chan struct{}
}

// startReplica starts a replica; with stopOnLoss it runs as cmd/bootimage-operator does
// (leader.Start stops it once the lease is known lost), else as an embedder's manager, which
// runs on until client-go's renew loop gives up: only the fence stands between it and a write.
func startReplica(stopOnLoss bool) *replica {
	GinkgoHelper()
	r := &replica{stall: &stall{thaw: make(chan struct{})}, writes: &writes{held: make(chan string, 1), release: make(chan struct{})}, ended: make(chan struct{})}
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { r.writes.next = rt; return r.writes })
	lockCfg := rest.CopyConfig(env.Config)
	lockCfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { r.stall.next = rt; return r.stall })
	opts := testenv.ManagerOptions(seams.Hooks{})
	opts.LeaderElection, opts.LeaderElectionID, opts.LeaderElectionNamespace, opts.LeaderElectionConfig = true, leaseName, leaseNS, lockCfg
	opts.LeaderElectionReleaseOnCancel = true
	opts.LeaseDuration, opts.RenewDeadline, opts.RetryPeriod = ptr(leaseDuration), ptr(renewDeadline), ptr(retryPeriod)
	var err error
	r.fence, err = leader.Configure(cfg, &opts, skewMargin)
	Expect(err).NotTo(HaveOccurred())
	r.mgr, err = ctrl.NewManager(cfg, opts)
	Expect(err).NotTo(HaveOccurred())
	Expect(controllers.AddToManager(r.mgr, controllers.Options{ReleaseVersion: fixtures.ReleaseVersion, Metrics: prometheus.NewRegistry()})).To(Succeed())
	runCtx, cancel := context.WithCancel(ctx)
	go func() {
		defer close(r.ended)
		if stopOnLoss {
			r.err = leader.Start(runCtx, r.mgr, r.fence)
		} else {
			r.err = r.mgr.Start(runCtx)
		}
	}()
	DeferCleanup(func() {
		cancel()
		r.stall.resume()
		r.writes.resume()
		Eventually(r.ended, "40s").Should(BeClosed())
	})
	return r
}

// resume lets held writes go, if their context still allows.
func (w *writes) resume() {
	if w.holding.CompareAndSwap(true, false) {
		close(w.release)
	}
}

func ptr[T any](v T) *T { return &v }

func lease() *coordinationv1.Lease {
	l := &coordinationv1.Lease{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: leaseNS, Name: leaseName}, l); err != nil {
		return &coordinationv1.Lease{}
	}
	return l
}

func holder() string {
	if h := lease().Spec.HolderIdentity; h != nil {
		return *h
	}
	return ""
}

func gcpImageOf(name string) func() string {
	return func() string {
		ms := &machinev1beta1.MachineSet{}
		Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: fixtures.MachineAPINamespace, Name: name}, ms)).To(Succeed())
		var ps struct {
			Disks []struct {
				Image string `json:"image"`
			} `json:"disks"`
		}
		Expect(json.Unmarshal(ms.Spec.Template.Spec.ProviderSpec.Value.Raw, &ps)).To(Succeed())
		return ps.Disks[0].Image
	}
}

// machineSetWrites counts the writes the API server reports per MachineSet.
func machineSetWrites() func() map[string]int {
	GinkgoHelper()
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	Expect(err).NotTo(HaveOccurred())
	w, err := wc.Watch(ctx, &machinev1beta1.MachineSetList{}, client.InNamespace(fixtures.MachineAPINamespace))
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(w.Stop)
	var mu sync.Mutex
	counts := map[string]int{}
	go func() {
		for ev := range w.ResultChan() {
			if o, ok := ev.Object.(client.Object); ok && ev.Type == watch.Modified {
				mu.Lock()
				counts[o.GetName()]++
				mu.Unlock()
			}
		}
	}()
	return func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		out := map[string]int{}
		for k, v := range counts {
			out[k] = v
		}
		return out
	}
}

func createMachineSets(names ...string) {
	GinkgoHelper()
	for _, name := range names {
		Expect(fixtures.Create(ctx, env.Client, fixtures.MachineSet(name, fixtures.GCPProviderSpec(fixtures.OldGCPImage)))).To(Succeed())
	}
}

// takeOver stalls first's lease renewals, starts a second replica and returns it once it holds
// the Lease; from then on first's writes and Lease writes are recorded.
func takeOver(first *replica, firstID string) *replica {
	GinkgoHelper()
	first.stall.stalled.Store(true)
	second := startReplica(true)
	Eventually(holder).ShouldNot(Equal(firstID))
	takeover := time.Now()
	first.writes.since.Store(&takeover)
	first.stall.leaseWrites.since.Store(&takeover)
	return second
}

var _ = Describe("A leader whose lease renewals stall", func() {
	It("makes no write once another identity holds the Lease, and stops", func() {
		createMachineSets("first-wave")
		counted := machineSetWrites()

		first := startReplica(true)
		Eventually(first.mgr.Elected()).Should(BeClosed())
		firstID := holder()
		Expect(firstID).NotTo(BeEmpty())
		Eventually(gcpImageOf("first-wave")).Should(Equal(fixtures.NewGCPImage))

		// Its renewals stall; its workers go on. A second replica takes the Lease once it expires.
		second := takeOver(first, firstID)
		Eventually(second.mgr.Elected()).Should(BeClosed())

		// Work for whoever leads: new MachineSets to update and status to write.
		var wave []string
		for i := range 10 {
			wave = append(wave, fmt.Sprintf("second-wave-%d", i))
		}
		createMachineSets(wave...)
		for _, name := range wave {
			Eventually(gcpImageOf(name)).Should(Equal(fixtures.NewGCPImage))
		}

		// Resumed, its renew request fails on the new holder's Lease; it has stopped already.
		first.stall.resume()
		Eventually(first.ended, "10s").Should(BeClosed(), "the deposed leader stops by itself")
		Expect(first.err).To(MatchError(leader.ErrLost))
		Expect(first.writes.list()).To(BeEmpty(), "no write from the deposed leader after the takeover")
		Expect(first.stall.leaseWrites.list()).To(BeEmpty(), "no Lease write accepted from the deposed leader after the takeover")
		Expect(holder()).To(Equal(second.fence.Identity()))
		Expect(first.fence.Check()).To(MatchError(leader.ErrFenced))
		Expect(second.fence.Check()).To(Succeed())
		for _, name := range append(wave, "first-wave") {
			// A GET shows a write before the watch delivers it: count once the watch has.
			Eventually(func() int { return counted()[name] }).ShouldNot(BeZero(), "the watch delivered the write of "+name)
			Expect(counted()[name]).To(Equal(1), "one write of "+name)
		}
	})

	// The write a paused process would send on resuming: it left the fence's check in time and
	// waits on the way out past the lease. Its deadline, the fence's closing time, ends it there;
	// nothing else does, since this manager is not stopped on loss.
	It("never sends a write held past the fence's closing time", func() {
		counted := machineSetWrites()
		first := startReplica(false)
		Eventually(first.mgr.Elected()).Should(BeClosed())
		firstID := holder()
		Expect(firstID).NotTo(BeEmpty())

		first.writes.holding.Store(true)
		createMachineSets("held")
		var held string
		Eventually(first.writes.held).Should(Receive(&held))
		GinkgoWriter.Println("Holding", held)

		second := takeOver(first, firstID)
		// As a resumed process or a slow link would, let held writes go if their context allows.
		first.writes.resume()
		first.stall.resume()

		Eventually(second.mgr.Elected()).Should(BeClosed())
		Eventually(gcpImageOf("held")).Should(Equal(fixtures.NewGCPImage))
		createMachineSets("after-takeover")
		Eventually(gcpImageOf("after-takeover")).Should(Equal(fixtures.NewGCPImage))
		Expect(first.fence.Check()).To(MatchError(leader.ErrFenced))
		Expect(first.writes.list()).To(BeEmpty(), "no write from the deposed leader after the takeover, the held one included")
		Expect(first.stall.leaseWrites.list()).To(BeEmpty(), "no Lease write accepted from the deposed leader after the takeover")
		// A GET shows a write before the watch delivers it: count once the watch has.
		Eventually(func() int { c := counted(); return min(c["held"], c["after-takeover"]) }).ShouldNot(BeZero(), "the watch delivered both writes")
		Expect(counted()).To(Equal(map[string]int{"held": 1, "after-takeover": 1}), "one write of each, by the new leader")
	})
})
