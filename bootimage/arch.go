package bootimage

import (
	"fmt"
	"strings"
)

// ArchAnnotation lists the labels the autoscaler gives a MachineSet's nodes, among them the
// architecture as kubernetes.io/arch=<arch>.
const ArchAnnotation = "capacity.cluster-autoscaler.kubernetes.io/labels"

// Architecture names: Kubernetes (GOARCH) to RPM, as the stream uses.
var rpmArch = map[string]string{"amd64": "x86_64", "arm64": "aarch64", "s390x": "s390x", "ppc64le": "ppc64le"}

// kubeToRPMArch returns the RPM (stream) name of a Kubernetes architecture.
func kubeToRPMArch(kubeArch string) (string, bool) {
	a, ok := rpmArch[kubeArch]
	return a, ok
}

// archFromAnnotation returns the Kubernetes architecture named in annotations, "" when the
// annotation is absent. An annotation without kubernetes.io/arch, or with an unknown value, is an
// error: guessing the architecture could point machines at an image they cannot boot.
func archFromAnnotation(annotations map[string]string) (string, error) {
	list, present := annotations[ArchAnnotation]
	if !present {
		return "", nil
	}
	for _, kv := range strings.Split(list, ",") {
		key, value, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok || key != "kubernetes.io/arch" {
			continue
		}
		if _, known := rpmArch[value]; !known {
			return "", fmt.Errorf("annotation %s names architecture %q; known: amd64, arm64, s390x, ppc64le", ArchAnnotation, value)
		}
		return value, nil
	}
	return "", fmt.Errorf("annotation %s (%q) has no kubernetes.io/arch=<arch> entry; add one or remove the annotation", ArchAnnotation, list)
}
