package bootimage_test

import (
	"github.com/coreos/stream-metadata-go/stream"
	configv1 "github.com/openshift/api/config/v1"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
)

var _ = Describe("ParseBootImages", func() {
	It("parses every entry of the streams map and ignores the stream key then", func() {
		cm := fixtures.BootImagesConfigMap50(fixtures.Streams50(), fixtures.OCP50ReleaseVersion)
		cm.Data["stream"] = "{not read}"
		s, err := bootimage.ParseBootImages(cm)
		Expect(err).NotTo(HaveOccurred())
		Expect(s.Names()).To(Equal([]string{"rhel-10", "rhel-9"}))
		Expect(s.ByName["rhel-10"].Stream).To(Equal("rhcos-5.0"))
		Expect(s.ByName["rhel-9"].Stream).To(Equal("rhcos-4.20"))
		Expect(s.Keyed).To(BeTrue())
		Expect(s.ReleaseVersion).To(Equal(fixtures.OCP50ReleaseVersion))
	})

	It("reads the stream key as rhel-9 without a streams map", func() {
		s, err := bootimage.ParseBootImages(fixtures.BootImagesConfigMap(fixtures.Stream(), "4.20.3"))
		Expect(err).NotTo(HaveOccurred())
		Expect(s.Names()).To(Equal([]string{"rhel-9"}))
		Expect(s.Keyed).To(BeFalse())
	})

	It("keeps the good entries of a map with a broken one, and names the broken one", func() {
		cm := fixtures.BootImagesConfigMap(fixtures.Stream(), "4.20.3")
		cm.Data["streams"] = `{"rhel-9": ` + cm.Data["stream"] + `, "rhel-10": {}}`
		s, err := bootimage.ParseBootImages(cm)
		Expect(err).NotTo(HaveOccurred())
		Expect(s.Names()).To(Equal([]string{"rhel-9"}))
		Expect(s.Invalid["rhel-10"]).To(MatchError(`ConfigMap openshift-machine-config-operator/coreos-bootimages key streams, entry rhel-10: CoreOS stream "" lists no architectures`))
	})

	DescribeTable("names the ConfigMap and the problem",
		func(data map[string]string, message string) {
			cm := fixtures.BootImagesConfigMap(fixtures.Stream(), "4.20.3")
			cm.Data = data
			_, err := bootimage.ParseBootImages(cm)
			Expect(err).To(MatchError(ContainSubstring(message)))
		},
		Entry("no stream", map[string]string{"releaseVersion": "4.20.3"}, "ConfigMap openshift-machine-config-operator/coreos-bootimages has no stream key"),
		Entry("not JSON", map[string]string{"stream": "{"}, "key stream: not a CoreOS stream"),
		Entry("no architectures", map[string]string{"stream": `{"stream":"x","architectures":{}}`}, `CoreOS stream "x" lists no architectures`),
		Entry("a broken streams map", map[string]string{"streams": "[]", "stream": "{}"}, "key streams is not a JSON map"),
		Entry("an empty streams map", map[string]string{"streams": "{}", "stream": "{}"}, "key streams holds no OS stream"),
	)

	It("maps Kubernetes architectures to the stream's", func() {
		for kube, rpm := range map[string]string{"amd64": "x86_64", "arm64": "aarch64", "s390x": "s390x", "ppc64le": "ppc64le"} {
			got, ok := bootimage.RPMArch(kube)
			Expect(ok).To(BeTrue())
			Expect(got).To(Equal(rpm))
		}
	})
})

var _ = DescribeTable("StreamProblem names what the stream lacks for the cluster itself",
	func(mutate func(*stream.Stream), platform configv1.PlatformType, arch, want string) {
		s := fixtures.Stream()
		mutate(s)
		got := bootimage.StreamProblem(&bootimage.Streams{ByName: map[string]*stream.Stream{"rhel-9": s}}, platform, arch)
		if want == "" {
			Expect(got).To(BeEmpty())
			return
		}
		Expect(got).To(ContainSubstring(want))
	},
	Entry("a complete stream", func(*stream.Stream) {}, configv1.AWSPlatformType, "amd64", ""),
	Entry("no control-plane architecture", func(s *stream.Stream) { delete(s.Architectures, "x86_64") }, configv1.GCPPlatformType, "amd64", "has no x86_64 boot images, the control plane's architecture"),
	Entry("no images of the platform", func(s *stream.Stream) {
		a := s.Architectures["x86_64"]
		a.Images.Gcp = nil
		s.Architectures["x86_64"] = a
	}, configv1.GCPPlatformType, "amd64", "no x86_64 boot images for GCP, the cluster's platform"),
	Entry("an unmanaged platform has nothing to lack", func(*stream.Stream) {}, configv1.NutanixPlatformType, "amd64", ""),
)
