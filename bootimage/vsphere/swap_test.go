package vsphere_test

import (
	"context"
	"errors"
	"maps"
	"slices"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/bootimage/vsphere"
)

// memoryVCenter is one workspace folder as a map of VM name to template. imports is the release
// an import yields; failOn, when set, fails that operation.
type memoryVCenter struct {
	vms       map[string]vsphere.Template
	imports   string
	diskTypes []string
	failOn    string
}

func (m *memoryVCenter) Template(_ context.Context, _ vsphere.Location, name string) (*vsphere.Template, error) {
	if m.failOn == "read" {
		return nil, errors.New("vCenter unreachable")
	}
	if t, ok := m.vms[name]; ok {
		return &t, nil
	}
	return nil, nil
}

func (m *memoryVCenter) ImportTemplate(ctx context.Context, _ vsphere.Import, name, _, diskType string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.diskTypes = append(m.diskTypes, diskType)
	m.vms[name] = vsphere.Template{Version: m.imports, DiskType: diskType, IsTemplate: true}
	return nil
}

func (m *memoryVCenter) RenameTemplate(_ context.Context, _ vsphere.Location, from, to string) error {
	if m.failOn == "rename" {
		return errors.New("rename refused")
	}
	m.vms[to] = m.vms[from]
	delete(m.vms, from)
	return nil
}

func (m *memoryVCenter) DestroyTemplate(_ context.Context, _ vsphere.Location, name string) error {
	delete(m.vms, name)
	return nil
}

var _ = Describe("vSphere template swaps", func() {
	const (
		name    = "infra-rhcos-fd1"
		release = "9.6.1"
		old     = "9.4.1"
	)
	importing, replaced := vsphere.SwapNames(name)
	current := vsphere.Template{Version: release, DiskType: "thick", IsTemplate: true}
	outdated := vsphere.Template{Version: old, DiskType: "eagerZeroedThick", IsTemplate: true}
	partial := vsphere.Template{Version: release, IsTemplate: false}
	imp := vsphere.Import{Name: name, Release: release, OVALocation: "https://mirror/rhcos.ova", OVASHA256: "ab"}
	imp.Folder = "/dc1/vm/infra"

	var vc *memoryVCenter
	var downloads int
	var swapper vsphere.Swapper
	BeforeEach(func() {
		downloads = 0
		vc = &memoryVCenter{vms: map[string]vsphere.Template{}, imports: release}
		swapper = vsphere.Swapper{
			Store: vc,
			OVA: func(context.Context, string, string) (string, error) {
				downloads++
				return "/cache/rhcos.ova", nil
			},
			NewDiskType: func(context.Context) (string, error) { return "thin", nil },
		}
	})
	names := func() []string { return slices.Sorted(maps.Keys(vc.vms)) }

	DescribeTable("finish from every state vCenter can be in, leaving only a current template",
		func(start map[string]vsphere.Template, steps []vsphere.SwapStep, diskTypes []string) {
			maps.Copy(vc.vms, start)
			Expect(swapper.Swap(context.Background(), imp)).To(Equal(steps))
			Expect(names()).To(Equal([]string{name}))
			Expect(vc.vms[name]).To(HaveField("Version", release))
			Expect(vc.diskTypes).To(Equal(diskTypes))
		},
		Entry("outdated: import, swap, delete",
			map[string]vsphere.Template{name: outdated},
			[]vsphere.SwapStep{vsphere.SwapImport, vsphere.SwapRenameAway, vsphere.SwapRenameIn, vsphere.SwapDeleteReplaced},
			[]string{"eagerZeroedThick"}),
		Entry("a new failure domain: provisioned as the install config says",
			map[string]vsphere.Template{},
			[]vsphere.SwapStep{vsphere.SwapImport, vsphere.SwapRenameIn}, []string{"thin"}),
		Entry("current: nothing to do", map[string]vsphere.Template{name: current}, nil, nil),
		Entry("current with an import left next to it: deleted",
			map[string]vsphere.Template{name: current, importing: current},
			[]vsphere.SwapStep{vsphere.SwapDeleteImporting}, nil),
		Entry("interrupted after the import: the verified import is reused",
			map[string]vsphere.Template{name: outdated, importing: current},
			[]vsphere.SwapStep{vsphere.SwapRenameAway, vsphere.SwapRenameIn, vsphere.SwapDeleteReplaced}, nil),
		Entry("interrupted during the import: the unverified import is replaced",
			map[string]vsphere.Template{name: outdated, importing: partial},
			[]vsphere.SwapStep{vsphere.SwapImport, vsphere.SwapRenameAway, vsphere.SwapRenameIn, vsphere.SwapDeleteReplaced},
			[]string{"eagerZeroedThick"}),
		Entry("interrupted after renaming away: finished forward",
			map[string]vsphere.Template{replaced: outdated, importing: current},
			[]vsphere.SwapStep{vsphere.SwapRenameIn, vsphere.SwapDeleteReplaced}, nil),
		Entry("renamed away with no verified import (the MCO's leftover): restored, then swapped",
			map[string]vsphere.Template{replaced: outdated},
			[]vsphere.SwapStep{vsphere.SwapRestore, vsphere.SwapImport, vsphere.SwapRenameAway, vsphere.SwapRenameIn, vsphere.SwapDeleteReplaced},
			[]string{"eagerZeroedThick"}),
		Entry("interrupted after renaming in: the replaced template is deleted",
			map[string]vsphere.Template{name: current, replaced: outdated},
			[]vsphere.SwapStep{vsphere.SwapDeleteReplaced}, nil),
	)

	It("is finished by the next run when stopped after any step", func() {
		full := []vsphere.SwapStep{vsphere.SwapImport, vsphere.SwapRenameAway, vsphere.SwapRenameIn, vsphere.SwapDeleteReplaced}
		for i, stop := range full {
			vc.vms = map[string]vsphere.Template{name: outdated}
			interrupted := swapper
			interrupted.AfterStep = func(_ context.Context, step vsphere.SwapStep) error {
				if step == stop {
					return errors.New("operator killed")
				}
				return nil
			}
			steps, err := interrupted.Swap(context.Background(), imp)
			Expect(err).To(MatchError("operator killed"))
			Expect(steps).To(Equal(full[:i+1]))
			rest, err := swapper.Swap(context.Background(), imp)
			Expect(err).NotTo(HaveOccurred())
			Expect(append(steps, rest...)).To(Equal(full), "stopped after %s", stop)
			Expect(names()).To(Equal([]string{name}))
		}
	})

	It("refuses an import that does not verify, once, and leaves the template in use alone", func() {
		vc.vms[name] = outdated
		vc.imports = "9.5.0"
		steps, err := swapper.Swap(context.Background(), imp)
		Expect(err).To(MatchError(ContainSubstring("is not a template of RHCOS 9.6.1; left for the next attempt to replace")))
		Expect(steps).To(Equal([]vsphere.SwapStep{vsphere.SwapImport}))
		Expect(downloads).To(Equal(1))
		Expect(vc.vms).To(HaveKeyWithValue(name, outdated))
	})

	It("stops at the first vCenter error, having changed nothing it cannot recover from", func() {
		vc.vms[name] = outdated
		vc.failOn = "rename"
		steps, err := swapper.Swap(context.Background(), imp)
		Expect(err).To(MatchError("rename refused"))
		Expect(steps).To(Equal([]vsphere.SwapStep{vsphere.SwapImport}))
		Expect(names()).To(ConsistOf(name, importing))

		vc.failOn = "read"
		_, err = swapper.Swap(context.Background(), imp)
		Expect(err).To(MatchError("vCenter unreachable"))
	})

	It("stops when its context is cancelled", func() {
		vc.vms[name] = outdated
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := swapper.Swap(ctx, imp)
		Expect(err).To(MatchError(context.Canceled))
		Expect(vc.vms).To(Equal(map[string]vsphere.Template{name: outdated}))
	})
})

var _ = Describe("A decision after the import it asked for", func() {
	asked := bootimage.Decision{
		Kind: "MachineSet", Name: "worker-a", Action: bootimage.Update, Reason: bootimage.ReasonImageOutdated,
		Current: "t@9.4.1", Target: "t@9.6.1",
		ProviderSpecPatch: []bootimage.PatchOp{{Op: "add", Path: "/template", Value: "t"}},
		Prepare:           &vsphere.Import{Name: "t", Release: "9.6.1"},
	}
	vsphere.ImportOf(asked).Folder = "/dc1/vm/infra"

	It("is the update the import made, from the template it replaced", func() {
		now := bootimage.Decision{Kind: "MachineSet", Name: "worker-a", Action: bootimage.NoChange, Reason: bootimage.ReasonUpToDate, Current: "t@9.6.1", Target: "t@9.6.1"}
		d := vsphere.Imported(asked, now)
		Expect(d.Action).To(Equal(bootimage.Update))
		Expect(d.Current).To(Equal("t@9.4.1"))
		Expect(d.ProviderSpecPatch).To(Equal(asked.ProviderSpecPatch))
		Expect(vsphere.ImportOf(d)).To(BeNil(), "nothing left to import")
		Expect(d.Message).To(Equal("imported template t as RHCOS 9.6.1 in /dc1/vm/infra"))
	})

	It("is the fresh decision when that is an update without an import, or about another target", func() {
		repoint := bootimage.Decision{Action: bootimage.Update, Target: "t@9.6.1", ProviderSpecPatch: asked.ProviderSpecPatch}
		Expect(vsphere.Imported(asked, repoint)).To(Equal(repoint))
		moved := bootimage.Decision{Action: bootimage.NoChange, Target: "t@9.7.0"}
		Expect(vsphere.Imported(asked, moved)).To(Equal(moved))
		skipped := bootimage.Decision{Action: bootimage.Skip, Target: "t@9.6.1"}
		Expect(vsphere.Imported(asked, skipped)).To(Equal(skipped))
	})
})
