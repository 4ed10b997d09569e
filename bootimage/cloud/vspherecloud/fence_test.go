package vspherecloud_test

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/vmware/govmomi/vim25/soap"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/bootimage-operator/bootimage-operator/bootimage/cloud"
	"github.com/bootimage-operator/bootimage-operator/bootimage/cloud/vspherecloud"
	"github.com/bootimage-operator/bootimage-operator/bootimage/vsphere"
	"github.com/bootimage-operator/bootimage-operator/leader"
	"github.com/bootimage-operator/bootimage-operator/test/fakecloud"
)

// lock is a lease lock in memory that always succeeds: each Create renews the fence.
type lock struct{ resourcelock.Interface }

func (lock) Create(context.Context, resourcelock.LeaderElectionRecord) error { return nil }
func (lock) Identity() string                                                { return "a" }

// network holds each SOAP request that reaches it while holding, until released or until the
// request's context ends, as a slow network or a paused process would, and counts those sent on.
type network struct {
	next    soap.RoundTripper
	holding atomic.Bool
	held    chan struct{}
	release chan struct{}
	sent    atomic.Int32
}

func (n *network) RoundTrip(ctx context.Context, req, res soap.HasFault) error {
	if n.holding.Load() {
		n.held <- struct{}{}
		select {
		case <-n.release:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	n.sent.Add(1)
	return n.next.RoundTrip(ctx, req, res)
}

var _ = Describe("vCenter steps of a leader-elected process", func() {
	It("send nothing once the fence closes, and a step held past it never lands", func() {
		vc, err := fakecloud.NewVCenter(ctx)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(vc.Close)
		folder, err := vc.ClusterFolder(ctx, "infra-1")
		Expect(err).NotTo(HaveOccurred())
		Expect(vc.SeedTemplate(ctx, folder, "old", "9.4.1", "infra-1")).To(Succeed())
		at := vsphere.Location{Server: vc.Server, Port: vc.Port, Datacenter: fakecloud.VCenterDatacenter, Folder: folder}

		// A lease of 3s fenced 1s before it ends, renewed once: the fence closes 2s from now.
		fence := leader.NewFence(3*time.Second, time.Second)
		Expect(fence.Lock(lock{}).Create(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "a"})).To(Succeed())
		leading := cloud.WithWriteFence(ctx, fence)

		net := &network{held: make(chan struct{}, 100), release: make(chan struct{})}
		vcenters := &vspherecloud.VCenters{RootCAs: vc.RootCAs(), Credentials: vc.Credentials("1")}
		vspherecloud.WrapSOAP(vcenters, func(next soap.RoundTripper) soap.RoundTripper { net.next = next; return net })
		DeferCleanup(vcenters.Close, context.Background())
		Expect(vcenters.Template(leading, at, "old")).NotTo(BeNil(), "the fence is open")

		// A rename leaves the process before the fence closes and is held on the way past it.
		net.holding.Store(true)
		renamed := make(chan error, 1)
		go func() { renamed <- vcenters.RenameTemplate(leading, at, "old", "renamed-late") }()
		Eventually(net.held).Should(Receive())
		Eventually(fence.Lost(), "5s").Should(BeClosed())
		Eventually(renamed).Should(Receive(MatchError(leader.ErrFenced)), "cancelled at the fence's closing")
		net.holding.Store(false)
		close(net.release)

		// Once closed, no step sends anything.
		sent := net.sent.Load()
		Expect(vcenters.RenameTemplate(leading, at, "old", "renamed-later")).To(MatchError(leader.ErrFenced))
		Expect(vcenters.DestroyTemplate(leading, at, "old")).To(MatchError(leader.ErrFenced))
		ova := filepath.Join(GinkgoT().TempDir(), "rhcos.ova")
		Expect(os.WriteFile(ova, fakecloud.OVA("9.6.1"), 0o600)).To(Succeed())
		Expect(vcenters.ImportTemplate(leading, vsphere.Import{Location: at}, "new", ova, "")).To(MatchError(leader.ErrFenced))
		_, err = vcenters.Template(leading, at, "old")
		Expect(err).To(MatchError(leader.ErrFenced))
		Expect(net.sent.Load()).To(Equal(sent), "no request sent after the fence closed")
		Expect(vc.VMs(ctx, folder)).To(ConsistOf("old"), "nothing landed in vCenter")
	})
})
