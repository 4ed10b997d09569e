package controllers

import (
	"context"
	"path"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/bootimage/cloud"
	"github.com/bootimage-operator/bootimage-operator/test/fakecloud"
)

// memoryStore is vCenter as a map of template name to template, for the disk provisioning an
// import asks for, which the simulator ignores.
type memoryStore struct {
	templates map[string]bootimage.VSphereTemplate
	diskTypes []string
	release   string
}

func (m *memoryStore) VSphereTemplate(_ context.Context, _ bootimage.VSphereLocation, name string) (*bootimage.VSphereTemplate, error) {
	if t, ok := m.templates[name]; ok {
		return &t, nil
	}
	return nil, nil
}

func (m *memoryStore) ImportTemplate(_ context.Context, _ bootimage.VSphereImport, name, _, diskType string) error {
	m.diskTypes = append(m.diskTypes, diskType)
	m.templates[name] = bootimage.VSphereTemplate{Version: m.release, DiskType: diskType, IsTemplate: true}
	return nil
}

func (m *memoryStore) RenameTemplate(_ context.Context, _ bootimage.VSphereLocation, from, to string) error {
	m.templates[to] = m.templates[from]
	delete(m.templates, from)
	return nil
}

func (m *memoryStore) DestroyTemplate(_ context.Context, _ bootimage.VSphereLocation, name string) error {
	delete(m.templates, name)
	return nil
}

var _ = Describe("Template imports provision disks", func() {
	const release = "9.6.1"
	var importer *TemplateImporter
	var store *memoryStore
	var imp bootimage.VSphereImport
	BeforeEach(func() {
		ovas := fakecloud.NewOVAServer()
		DeferCleanup(ovas.Close)
		ova := fakecloud.OVA(release)
		store = &memoryStore{templates: map[string]bootimage.VSphereTemplate{}, release: release}
		installConfig := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: VSphereCredentialsNamespace, Name: InstallConfigConfigMap},
			Data:       map[string]string{"install-config": "platform:\n  vsphere:\n    diskType: thin\n"},
		}
		importer = &TemplateImporter{
			Store: store, OVAs: &cloud.OVACache{Dir: GinkgoT().TempDir(), MaxBytes: 1 << 20},
			Reader: fake.NewClientBuilder().WithObjects(installConfig).Build(),
		}
		imp = bootimage.VSphereImport{Name: "infra-rhcos-fd1", Release: release, OVALocation: ovas.Put("/rhcos.ova", ova), OVASHA256: fakecloud.SHA256(ova)}
		imp.Folder = "/dc1/vm/infra"
	})

	It("as the template they replace", func() {
		store.templates[imp.Name] = bootimage.VSphereTemplate{Version: "9.4.1", DiskType: "eagerZeroedThick", IsTemplate: true}
		Expect(importer.Ensure(context.Background(), imp)).To(BeTrue())
		Expect(store.diskTypes).To(Equal([]string{"eagerZeroedThick"}))
		Expect(store.templates).To(HaveKeyWithValue(imp.Name, HaveField("Version", release)))
		Expect(store.templates).To(HaveLen(1))
	})

	It("for a new failure domain, as the install config says", func() {
		Expect(importer.Ensure(context.Background(), imp)).To(BeTrue())
		Expect(store.diskTypes).To(Equal([]string{"thin"}))
		Expect(path.Base(imp.Key())).To(Equal(imp.Name))
	})
})
