// Package fencing runs two leader-elected operators on one API server and stalls the first one's
// lease renewals, as a paused process or a proxy holding its renew requests would: once another
// identity holds the Lease, the first must make no write.
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
	"k8s.io/klog/v2/textlogger"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/internal/seams"
	"github.com/bootimage-operator/bootimage-operator/kube"
	"github.com/bootimage-operator/bootimage-operator/leader"
	"github.com/bootimage-operator/bootimage-operator/operator"
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
	RegisterFailHandler(Fail)
	SetDefaultEventuallyTimeout(60 * time.Second)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	RunSpecs(t, "a deposed leader makes no write")
}

var _ = BeforeSuite(func() {
	ctrl.SetLogger(textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(GinkgoWriter), textlogger.Verbosity(1))))
	env = testenv.StartForSpecs(testenv.Options{})
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

// writes records the write requests a process sends after since is set.
type writes struct {
	next  http.RoundTripper
	since atomic.Pointer[time.Time]
	mu    sync.Mutex
	sent  []string
}

func (w *writes) RoundTrip(req *http.Request) (*http.Response, error) {
	// Events are not fenced (the recorder has its own client); every other write sent is counted.
	if !strings.Contains(req.URL.Path, "/events") {
		w.record(req)
	}
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

func startReplica() *replica {
	GinkgoHelper()
	r := &replica{stall: &stall{thaw: make(chan struct{})}, writes: &writes{}, ended: make(chan struct{})}
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
	Expect(operator.AddToManager(r.mgr, operator.Options{ReleaseVersion: fixtures.ReleaseVersion, Metrics: prometheus.NewRegistry()})).To(Succeed())
	runCtx, cancel := context.WithCancel(ctx)
	go func() {
		defer close(r.ended)
		r.err = leader.Start(runCtx, r.mgr, r.fence)
	}()
	DeferCleanup(func() {
		cancel()
		r.stall.resume()
		Eventually(r.ended, "40s").Should(BeClosed())
	})
	return r
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

var _ = Describe("A leader whose lease renewals stall", func() {
	It("makes no write once another identity holds the Lease, and stops", func() {
		Expect(fixtures.Create(ctx, env.Client, fixtures.GCPCluster(
			fixtures.MachineSet("first-wave", fixtures.GCPProviderSpec(fixtures.OldGCPImage)))...)).To(Succeed())
		counted := machineSetWrites()

		first := startReplica()
		Eventually(first.mgr.Elected()).Should(BeClosed())
		firstID := holder()
		Expect(firstID).NotTo(BeEmpty())
		Eventually(gcpImageOf("first-wave")).Should(Equal(fixtures.NewGCPImage))

		// Its renewals stall; its workers go on. A second replica takes the Lease once it expires.
		first.stall.stalled.Store(true)
		second := startReplica()
		Eventually(holder).ShouldNot(Equal(firstID))
		takeover := time.Now()
		first.writes.since.Store(&takeover)
		first.stall.leaseWrites.since.Store(&takeover)
		Eventually(second.mgr.Elected()).Should(BeClosed())

		// Work for whoever leads: new MachineSets to update and status to write.
		var wave []string
		for i := range 10 {
			name := fmt.Sprintf("second-wave-%d", i)
			Expect(fixtures.Create(ctx, env.Client, fixtures.MachineSet(name, fixtures.GCPProviderSpec(fixtures.OldGCPImage)))).To(Succeed())
			wave = append(wave, name)
		}
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
			Expect(counted()[name]).To(Equal(1), "one write of "+name)
		}
	})
})
