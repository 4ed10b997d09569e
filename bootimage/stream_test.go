package bootimage_test

import (
	"encoding/json"

	"github.com/coreos/stream-metadata-go/stream"
	configv1 "github.com/openshift/api/config/v1"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
)

var _ = Describe("ParseBootImages", func() {
	It("prefers the rhel-9 entry of the streams map", func() {
		cm := fixtures.BootImagesConfigMap(fixtures.Stream(), "4.20.3")
		rhel9 := fixtures.Stream()
		rhel9.Stream = "rhel-9.6"
		raw, err := json.Marshal(map[string]any{"rhel-9": rhel9, "rhel-10": map[string]any{"stream": "rhel-10.1", "architectures": map[string]any{}}})
		Expect(err).NotTo(HaveOccurred())
		cm.Data["streams"] = string(raw)
		s, err := bootimage.ParseBootImages(cm)
		Expect(err).NotTo(HaveOccurred())
		Expect(s.Default.Stream).To(Equal("rhel-9.6"))
		Expect(s.ReleaseVersion).To(Equal("4.20.3"))
	})

	It("falls back to the stream key when the map has no rhel-9 entry", func() {
		cm := fixtures.BootImagesConfigMap(fixtures.Stream(), "4.20.3")
		cm.Data["streams"] = `{"rhel-10": {}}`
		s, err := bootimage.ParseBootImages(cm)
		Expect(err).NotTo(HaveOccurred())
		Expect(s.Default.Stream).To(Equal("rhcos-4.20"))
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
		got := bootimage.StreamProblem(&bootimage.Streams{Default: s}, platform, arch)
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
