package main

import (
	"crypto/tls"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/types"
	configv1 "github.com/openshift/api/config/v1"
	appsv1 "k8s.io/api/apps/v1"

	"github.com/bootimage-operator/bootimage-operator/manifests"
)

var _ = Describe("Cluster tuning", func() {
	It("picks the single-node lease timings from controlPlaneTopology, as the MCO's GetLeaderElectionConfig", func() {
		Expect(leaseFor(configv1.SingleReplicaTopologyMode)).To(Equal(leaseTimings{270 * time.Second, 240 * time.Second, 60 * time.Second}))
		Expect(leaseFor(configv1.HighlyAvailableTopologyMode)).To(Equal(leaseTimings{137 * time.Second, 107 * time.Second, 26 * time.Second}))
		Expect(leaseFor("")).To(Equal(haLease))
	})

	DescribeTable("maps the TLS security profile as the MCO's GetSecurityProfileCiphers",
		func(profile *configv1.TLSSecurityProfile, wantType configv1.TLSProfileType, wantMin uint16, wantSuites any) {
			gotType, gotMin, gotSuites := tlsFromProfile(profile)
			Expect(gotType).To(Equal(wantType))
			Expect(gotMin).To(Equal(wantMin))
			if m, ok := wantSuites.(types.GomegaMatcher); ok {
				Expect(gotSuites).To(m)
			} else {
				Expect(gotSuites).To(Equal(wantSuites))
			}
		},
		Entry("none: Intermediate", nil, configv1.TLSProfileIntermediateType, uint16(tls.VersionTLS12), []uint16{
			tls.TLS_AES_128_GCM_SHA256, tls.TLS_AES_256_GCM_SHA384, tls.TLS_CHACHA20_POLY1305_SHA256,
			tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
			tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
			tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
		}),
		Entry("Modern: TLS 1.3 (Go ignores the suites there, as the MCO's kube-rbac-proxy does)", &configv1.TLSSecurityProfile{Type: configv1.TLSProfileModernType}, configv1.TLSProfileModernType, uint16(tls.VersionTLS13),
			[]uint16{tls.TLS_AES_128_GCM_SHA256, tls.TLS_AES_256_GCM_SHA384, tls.TLS_CHACHA20_POLY1305_SHA256}),
		Entry("Custom", &configv1.TLSSecurityProfile{Type: configv1.TLSProfileCustomType, Custom: &configv1.CustomTLSProfile{TLSProfileSpec: configv1.TLSProfileSpec{
			Ciphers: []string{"ECDHE-RSA-AES256-GCM-SHA384", "DHE-RSA-AES256-GCM-SHA384"}, MinTLSVersion: configv1.VersionTLS12,
		}}}, configv1.TLSProfileCustomType, uint16(tls.VersionTLS12), []uint16{tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384}),
		Entry("Custom without a spec: Intermediate", &configv1.TLSSecurityProfile{Type: configv1.TLSProfileCustomType}, configv1.TLSProfileIntermediateType, uint16(tls.VersionTLS12), HaveLen(9)),
		Entry("Custom with no cipher Go implements: Intermediate", &configv1.TLSSecurityProfile{Type: configv1.TLSProfileCustomType, Custom: &configv1.CustomTLSProfile{TLSProfileSpec: configv1.TLSProfileSpec{
			Ciphers: []string{"DHE-RSA-AES256-GCM-SHA384"}, MinTLSVersion: configv1.VersionTLS12,
		}}}, configv1.TLSProfileIntermediateType, uint16(tls.VersionTLS12), HaveLen(9)),
	)

	It("gives the pod more time to stop than the manager's shutdown grace", func() {
		var deployment *appsv1.Deployment
		for _, obj := range manifestObjects(manifests.DeploymentFile) {
			if d, ok := obj.(*appsv1.Deployment); ok {
				deployment = d
			}
		}
		Expect(deployment).NotTo(BeNil())
		grace := deployment.Spec.Template.Spec.TerminationGracePeriodSeconds
		Expect(grace).NotTo(BeNil())
		Expect(time.Duration(*grace) * time.Second).To(BeNumerically(">", shutdownGrace+10*time.Second))
	})
})
