package vspherecloud_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/bootimage-operator/bootimage-operator/bootimage/cloud/vspherecloud"
	"github.com/bootimage-operator/bootimage-operator/bootimage/vsphere"
	"github.com/bootimage-operator/bootimage-operator/test/fakecloud"
)

var _ = Describe("vCenter through govmomi, against vcsim", Ordered, func() {
	var vc *fakecloud.VCenter
	var vcenters *vspherecloud.VCenters
	var at vsphere.Location
	var imp vsphere.Import

	BeforeAll(func() {
		var err error
		vc, err = fakecloud.NewVCenter(ctx)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(vc.Close)
		folder, err := vc.ClusterFolder(ctx, "infra-1")
		Expect(err).NotTo(HaveOccurred())
		vcenters = &vspherecloud.VCenters{RootCAs: vc.RootCAs(), Credentials: vc.Credentials("1")}
		DeferCleanup(vcenters.Close, context.Background())
		at = vsphere.Location{Server: vc.Server, Port: vc.Port, Datacenter: fakecloud.VCenterDatacenter, Folder: folder}
		imp = vsphere.Import{
			Location: at, Name: "infra-1-rhcos-fd1", ComputeCluster: fakecloud.VCenterCluster, ResourcePool: fakecloud.VCenterPool,
			Datastore: fakecloud.VCenterDatastore, Network: fakecloud.VCenterNetwork, Release: "9.6.1", InfrastructureName: "infra-1",
		}
	})

	It("answers nil for a template that is not in the folder", func() {
		Expect(vcenters.Template(ctx, at, "nope")).To(BeNil())
	})

	It("imports an OVA as a tagged template, secure boot off, and reads its RHCOS version", func() {
		ova := filepath.Join(GinkgoT().TempDir(), "rhcos.ova")
		Expect(os.WriteFile(ova, fakecloud.OVA("9.6.1"), 0o600)).To(Succeed())
		Expect(vcenters.ImportTemplate(ctx, imp, imp.Name, ova, "thin")).To(Succeed())

		t, err := vcenters.Template(ctx, at, imp.Name)
		Expect(err).NotTo(HaveOccurred())
		Expect(*t).To(Equal(vsphere.Template{Path: at.Folder + "/" + imp.Name, Version: "9.6.1", DiskType: "thin", IsTemplate: true}))
		vm, tagNames, err := vc.VM(ctx, t.Path)
		Expect(err).NotTo(HaveOccurred())
		Expect(tagNames).To(ConsistOf("infra-1"))
		Expect(vm.Config.BootOptions).To(HaveField("EfiSecureBootEnabled", HaveValue(BeFalse())))
		Expect(vm.Config.Hardware.Device).To(ContainElement(BeAssignableToTypeOf(&types.VirtualDisk{})))
	})

	It("renames and deletes templates in the folder only", func() {
		Expect(vcenters.RenameTemplate(ctx, at, imp.Name, "renamed")).To(Succeed())
		Expect(vcenters.Template(ctx, at, imp.Name)).To(BeNil())
		Expect(vcenters.DestroyTemplate(ctx, at, "renamed")).To(Succeed())
		Expect(vc.VMs(ctx, at.Folder)).To(BeEmpty())
		Expect(vcenters.DestroyTemplate(ctx, at, "renamed")).To(Succeed(), "deleting what is gone is done")
	})

	It("refuses a vCenter whose certificate it does not trust", func() {
		untrusting := &vspherecloud.VCenters{Credentials: vcenters.Credentials}
		_, err := untrusting.Template(ctx, at, imp.Name)
		Expect(err).To(MatchError(ContainSubstring("certificate")))
	})

	It("keeps one session per vCenter and logs it out on Close", func() {
		before, err := vc.Sessions(ctx, fakecloud.VCenterUsername)
		Expect(err).NotTo(HaveOccurred())
		own := &vspherecloud.VCenters{RootCAs: vc.RootCAs(), Credentials: vcenters.Credentials}
		for range 3 {
			_, err := own.Template(ctx, at, imp.Name)
			Expect(err).NotTo(HaveOccurred())
		}
		Expect(vc.Sessions(ctx, fakecloud.VCenterUsername)).To(Equal(before + 1))

		own.Credentials = vc.Credentials("2")
		_, err = own.Template(ctx, at, imp.Name)
		Expect(err).NotTo(HaveOccurred())
		Expect(vc.Sessions(ctx, fakecloud.VCenterUsername)).To(Equal(before+1), "new credentials replace the session")
		own.Close(ctx)
		Expect(vc.Sessions(ctx, fakecloud.VCenterUsername)).To(Equal(before))
	})

	It("puts a deadline on every call, and holds no lock while a vCenter does not answer", func() {
		// A vCenter that accepts connections and never answers.
		hung, err := net.Listen("tcp", "127.0.0.1:0")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(hung.Close)
		go func() {
			for {
				c, err := hung.Accept()
				if err != nil {
					return
				}
				DeferCleanup(c.Close)
			}
		}()
		hungAt := at
		hungAt.Server, hungAt.Port = "localhost", int32(hung.Addr().(*net.TCPAddr).Port)
		both := &vspherecloud.VCenters{RootCAs: vc.RootCAs(), Credentials: vcenters.Credentials, CallTimeout: 5 * time.Second}
		DeferCleanup(both.Close, context.Background())

		deadline := make(chan error, 1)
		go func() {
			_, err := both.Template(ctx, hungAt, imp.Name)
			deadline <- err
		}()
		// A caller that gives up while the login is under way fails alone, at once.
		gaveUp, cancel := context.WithCancel(ctx)
		cancelled := make(chan error, 1)
		go func() {
			_, err := both.Template(gaveUp, hungAt, imp.Name)
			cancelled <- err
		}()
		cancel()
		Eventually(cancelled).Should(Receive(MatchError(context.Canceled)))
		// The other vCenter answers meanwhile.
		Expect(both.Template(ctx, at, "nope")).To(BeNil())
		Expect(deadline).NotTo(Receive(), "the hung vCenter's login is still under way")
		Eventually(deadline, 30*time.Second).Should(Receive(MatchError(context.DeadlineExceeded)))
	})
})
