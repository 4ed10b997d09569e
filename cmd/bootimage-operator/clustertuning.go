package main

import (
	"context"
	"crypto/tls"
	"time"

	"github.com/go-logr/logr"
	configv1 "github.com/openshift/api/config/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/internal/kube"
)

// leaseTimings are the leader election timings.
type leaseTimings struct {
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// Leader election timings of library-go's LeaderElectionDefaulting (HA) and LeaderElectionSNOConfig
// (single node), as the MCO's GetLeaderElectionConfig picks them by controlPlaneTopology. HA: a
// 137s lease survives a 60s kube-apiserver outage. Single node: the API server restarts on every
// upgrade; 270s/240s/60s survive a 180s outage with 30s of clock skew, at fewer Lease writes.
var (
	haLease  = leaseTimings{LeaseDuration: 137 * time.Second, RenewDeadline: 107 * time.Second, RetryPeriod: 26 * time.Second}
	snoLease = leaseTimings{LeaseDuration: 270 * time.Second, RenewDeadline: 240 * time.Second, RetryPeriod: 60 * time.Second}
)

// shutdownGrace is how long the manager waits for its runnables on shutdown; the Deployment's
// terminationGracePeriodSeconds is above it so the Lease is released before the kubelet kills.
const shutdownGrace = 30 * time.Second

// clusterTuning is what the process reads from the cluster before it starts the manager.
type clusterTuning struct {
	Lease leaseTimings
	// TLSMinVersion and TLSCipherSuites are the metrics endpoint's, from APIServer/cluster.
	TLSMinVersion   uint16
	TLSCipherSuites []uint16
	// TLSProfile names the profile in force, for the log.
	TLSProfile configv1.TLSProfileType
}

// readClusterTuning reads Infrastructure/cluster and APIServer/cluster. Either may be missing or
// unreadable (a cluster still installing, RBAC not yet applied): the HA timings and the
// Intermediate profile then apply, as in the MCO.
func readClusterTuning(ctx context.Context, cfg *rest.Config, log logr.Logger) clusterTuning {
	tuning := clusterTuning{Lease: haLease}
	c, err := client.New(cfg, client.Options{Scheme: kube.NewScheme()})
	if err != nil {
		log.Info("Using HA lease timings and the Intermediate TLS profile", "reason", err.Error())
		tuning.TLSProfile, tuning.TLSMinVersion, tuning.TLSCipherSuites = tlsFromProfile(nil)
		return tuning
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	infra := &configv1.Infrastructure{}
	if err := c.Get(ctx, client.ObjectKey{Name: "cluster"}, infra); err != nil {
		log.Info("Using HA lease timings", "reason", "reading Infrastructure/cluster: "+err.Error())
	} else {
		tuning.Lease = leaseFor(infra.Status.ControlPlaneTopology)
	}
	var profile *configv1.TLSSecurityProfile
	apiServer := &configv1.APIServer{}
	if err := c.Get(ctx, client.ObjectKey{Name: "cluster"}, apiServer); err != nil {
		log.Info("Using the Intermediate TLS profile for metrics", "reason", "reading APIServer/cluster: "+err.Error())
	} else {
		profile = apiServer.Spec.TLSSecurityProfile
	}
	tuning.TLSProfile, tuning.TLSMinVersion, tuning.TLSCipherSuites = tlsFromProfile(profile)
	return tuning
}

// leaseFor returns the lease timings of a control plane topology.
func leaseFor(topology configv1.TopologyMode) leaseTimings {
	if topology == configv1.SingleReplicaTopologyMode {
		return snoLease
	}
	return haLease
}

// tlsFromProfile maps a TLS security profile to Go's settings the way the MCO's
// GetSecurityProfileCiphers and GetGoTLSConfig do: nil, or Custom without a spec, is Intermediate;
// OpenSSL cipher names become IANA names (library-go's OpenSSLToIANACipherSuites mapping), and
// names Go does not implement are dropped. Go ignores the TLS 1.3 suites listed (not configurable).
func tlsFromProfile(profile *configv1.TLSSecurityProfile) (configv1.TLSProfileType, uint16, []uint16) {
	profileType := configv1.TLSProfileIntermediateType
	if profile != nil {
		profileType = profile.Type
	}
	var spec *configv1.TLSProfileSpec
	if profileType == configv1.TLSProfileCustomType {
		if profile.Custom != nil {
			spec = &profile.Custom.TLSProfileSpec
		}
	} else {
		spec = configv1.TLSProfiles[profileType]
	}
	if spec == nil {
		profileType, spec = configv1.TLSProfileIntermediateType, configv1.TLSProfiles[configv1.TLSProfileIntermediateType]
	}
	ids := map[string]uint16{}
	for _, s := range append(tls.CipherSuites(), tls.InsecureCipherSuites()...) {
		ids[s.Name] = s.ID
	}
	var suites []uint16
	for _, name := range spec.Ciphers {
		if id, ok := ids[openSSLToIANA[name]]; ok {
			suites = append(suites, id)
		}
	}
	minVersion, ok := tlsVersions[spec.MinTLSVersion]
	if !ok || (len(suites) == 0 && minVersion < tls.VersionTLS13) {
		// As GetGoTLSConfig: settings Go cannot use fall back to Intermediate.
		if profileType != configv1.TLSProfileIntermediateType {
			_, v, s := tlsFromProfile(nil)
			return configv1.TLSProfileIntermediateType, v, s
		}
	}
	return profileType, minVersion, suites
}

var tlsVersions = map[configv1.TLSProtocolVersion]uint16{
	configv1.VersionTLS10: tls.VersionTLS10,
	configv1.VersionTLS11: tls.VersionTLS11,
	configv1.VersionTLS12: tls.VersionTLS12,
	configv1.VersionTLS13: tls.VersionTLS13,
}

// openSSLToIANA is library-go's crypto mapping of the OpenSSL cipher names openshift/api's
// profiles use to the IANA names Go uses (library-go is not a requirement of this module).
var openSSLToIANA = map[string]string{
	"TLS_AES_128_GCM_SHA256":        "TLS_AES_128_GCM_SHA256",
	"TLS_AES_256_GCM_SHA384":        "TLS_AES_256_GCM_SHA384",
	"TLS_CHACHA20_POLY1305_SHA256":  "TLS_CHACHA20_POLY1305_SHA256",
	"ECDHE-ECDSA-AES128-GCM-SHA256": "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
	"ECDHE-RSA-AES128-GCM-SHA256":   "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
	"ECDHE-ECDSA-AES256-GCM-SHA384": "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
	"ECDHE-RSA-AES256-GCM-SHA384":   "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
	"ECDHE-ECDSA-CHACHA20-POLY1305": "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
	"ECDHE-RSA-CHACHA20-POLY1305":   "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
	"ECDHE-ECDSA-AES128-SHA256":     "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256",
	"ECDHE-RSA-AES128-SHA256":       "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256",
	"AES128-GCM-SHA256":             "TLS_RSA_WITH_AES_128_GCM_SHA256",
	"AES256-GCM-SHA384":             "TLS_RSA_WITH_AES_256_GCM_SHA384",
	"AES128-SHA256":                 "TLS_RSA_WITH_AES_128_CBC_SHA256",
	"ECDHE-ECDSA-AES128-SHA":        "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
	"ECDHE-RSA-AES128-SHA":          "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
	"ECDHE-ECDSA-AES256-SHA":        "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
	"ECDHE-RSA-AES256-SHA":          "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
	"AES128-SHA":                    "TLS_RSA_WITH_AES_128_CBC_SHA",
	"AES256-SHA":                    "TLS_RSA_WITH_AES_256_CBC_SHA",
	"DES-CBC3-SHA":                  "TLS_RSA_WITH_3DES_EDE_CBC_SHA",
}
