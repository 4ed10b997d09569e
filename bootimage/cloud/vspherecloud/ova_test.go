package vspherecloud_test

import (
	"context"
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/bootimage-operator/bootimage-operator/bootimage/cloud/vspherecloud"
	"github.com/bootimage-operator/bootimage-operator/test/fakecloud"
)

var _ = Describe("The OVA cache", func() {
	var server *fakecloud.OVAServer
	var cache *vspherecloud.OVACache
	var ova []byte
	var location, sum string
	BeforeEach(func() {
		server = fakecloud.NewOVAServer()
		DeferCleanup(server.Close)
		ova = fakecloud.OVA("9.6.1")
		location, sum = server.Put("/rhcos.ova", ova), fakecloud.SHA256(ova)
		cache = &vspherecloud.OVACache{Dir: GinkgoT().TempDir(), MaxBytes: 1 << 20}
	})

	It("downloads once, names the file by its sha256 and verifies it before each use", func() {
		for range 2 {
			p, err := cache.Get(ctx, location, sum)
			Expect(err).NotTo(HaveOccurred())
			Expect(p).To(Equal(filepath.Join(cache.Dir, sum+".ova")))
			Expect(os.ReadFile(p)).To(Equal(ova))
		}
		Expect(server.Downloads.Load()).To(BeEquivalentTo(1))

		Expect(os.WriteFile(filepath.Join(cache.Dir, sum+".ova"), []byte("bit rot"), 0o600)).To(Succeed())
		p, err := cache.Get(ctx, location, sum)
		Expect(err).NotTo(HaveOccurred())
		Expect(os.ReadFile(p)).To(Equal(ova), "a cached file that no longer matches is downloaded again")
		Expect(server.Downloads.Load()).To(BeEquivalentTo(2))
	})

	It("keeps only the OVA asked for, and no leftovers of a crashed download", func() {
		Expect(os.WriteFile(filepath.Join(cache.Dir, "old.ova"), []byte("old"), 0o600)).To(Succeed())
		Expect(os.WriteFile(filepath.Join(cache.Dir, ".download-123"), []byte("partial"), 0o600)).To(Succeed())
		_, err := cache.Get(ctx, location, sum)
		Expect(err).NotTo(HaveOccurred())
		Expect(os.ReadDir(cache.Dir)).To(ConsistOf(HaveField("Name()", sum+".ova")))
	})

	It("refuses an OVA larger than the cache, naming its checksum, and keeps nothing", func() {
		cache.MaxBytes = int64(len(ova) - 1)
		_, err := cache.Get(ctx, location, sum)
		Expect(err).To(MatchError(And(ContainSubstring(sum), ContainSubstring("larger than the cache's"))))
		Expect(os.ReadDir(cache.Dir)).To(BeEmpty())
	})

	It("refuses a stream without a usable sha256 before downloading", func() {
		_, err := cache.Get(ctx, location, "c3")
		Expect(err).To(MatchError(ContainSubstring(`the stream's sha256 "c3" is not a SHA-256 checksum`)))
		Expect(server.Downloads.Load()).To(BeZero())
	})

	It("says which OVA a server does not have", func() {
		_, err := cache.Get(ctx, server.URL+"/missing.ova", sum)
		Expect(err).To(MatchError(ContainSubstring("/missing.ova: HTTP 404")))
	})

	It("ends a stalled download with its context, and a download waiting behind it with its own", func() {
		release := server.Stall()
		DeferCleanup(release)
		stalled, cancel := context.WithCancel(ctx)
		first := make(chan error, 1)
		go func() {
			_, err := cache.Get(stalled, location, sum)
			first <- err
		}()
		Eventually(server.Stalled.Load).Should(BeEquivalentTo(1))

		waiting, cancelWaiting := context.WithCancel(ctx)
		cancelWaiting()
		_, err := cache.Get(waiting, location, sum)
		Expect(err).To(MatchError(And(ContainSubstring("waiting for another download"), ContainSubstring(context.Canceled.Error()))))

		cancel()
		Eventually(first).Should(Receive(MatchError(ContainSubstring(context.Canceled.Error()))))
		Eventually(server.Abandoned.Load).Should(BeEquivalentTo(1))
		Expect(os.ReadDir(cache.Dir)).To(BeEmpty(), "nothing of the partial download is kept")

		release()
		Expect(cache.Get(ctx, location, sum)).To(Equal(filepath.Join(cache.Dir, sum+".ova")), "the next download works")
	})
})
