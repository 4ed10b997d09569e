package kube

import (
	"context"
	"crypto/x509"
	"fmt"
	"sync"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/bootimage/aws"
	"github.com/bootimage-operator/bootimage-operator/bootimage/cloud"
	"github.com/bootimage-operator/bootimage-operator/bootimage/cloud/awscloud"
	"github.com/bootimage-operator/bootimage-operator/bootimage/cloud/vspherecloud"
	"github.com/bootimage-operator/bootimage-operator/bootimage/gcp"
)

// cloudImagesTTL bounds how stale a cloud answer may be: images are immutable, but one may be
// deregistered, deprecated or made available meanwhile.
const cloudImagesTTL = 10 * time.Minute

// Clouds returns the AWS and GCP image lookups of the cluster, configured from its
// credentials Secrets and Infrastructure, read through c: the manager's cache in the operator, a
// direct client in `bootimagectl plan`. rootCAs, when set, are trusted for the cloud endpoints;
// backoff is how long failed calls are remembered (zero fields: cloud's defaults); metrics, when
// set, count the requests. newGCP, when nil, leaves GCP images unlooked-up: the
// image prefix rule alone decides, as on a GCP cluster without credentials.
func Clouds(c client.Reader, rootCAs *x509.CertPool, backoff cloud.Backoff, metrics cloud.Observer, newGCP gcp.NewImages) bootimage.Clouds {
	clouds := bootimage.Clouds{
		configv1.AWSPlatformType: &awscloud.EC2{TTL: cloudImagesTTL, RootCAs: rootCAs, Backoff: backoff, Metrics: metrics,
			Settings: awsSettings(c, aws.CredentialsSecret), CopySettings: awsSettings(c, aws.CopyCredentialsSecret)},
	}
	var gcpOnce sync.Once
	if newGCP == nil {
		clouds[configv1.GCPPlatformType] = noGCP{once: &gcpOnce}
		return clouds
	}
	clouds[configv1.GCPPlatformType] = newGCP(func(ctx context.Context) (gcp.Settings, error) {
		secret, err := credentialsSecret(ctx, c, gcp.CredentialsSecret)
		if err == bootimage.ErrNoCatalog {
			gcpOnce.Do(func() {
				logf.FromContext(ctx).Info("No GCP credentials: skipping the target image pre-flight check; the image prefix rule alone decides", "secret", MachineAPINamespace+"/"+gcp.CredentialsSecret)
			})
		}
		if err != nil {
			return gcp.Settings{}, err
		}
		return gcp.Settings{Version: secret.ResourceVersion, CredentialsJSON: secret.Data["service_account.json"]}, nil
	}, cloudImagesTTL, backoff, metrics)
	return clouds
}

// noGCP stands in when the embedder registered no GCP lookups.
type noGCP struct{ once *sync.Once }

func (n noGCP) Image(ctx context.Context, _, _ string) (*gcp.Image, error) {
	n.once.Do(func() {
		logf.FromContext(ctx).Info("No GCP image lookups registered in this binary: skipping the target image pre-flight check; the image prefix rule alone decides")
	})
	return nil, bootimage.ErrNoCatalog
}

// awsSettings reads EC2's settings from Secret openshift-machine-api/name and the Infrastructure's
// service endpoints.
func awsSettings(c client.Reader, name string) func(context.Context) (awscloud.Settings, error) {
	return func(ctx context.Context) (awscloud.Settings, error) {
		secret, err := credentialsSecret(ctx, c, name)
		if err != nil {
			return awscloud.Settings{}, err
		}
		s := awscloud.Settings{
			Version:         name + "/" + secret.ResourceVersion,
			SharedConfig:    secret.Data["credentials"],
			AccessKeyID:     string(secret.Data["aws_access_key_id"]),
			SecretAccessKey: string(secret.Data["aws_secret_access_key"]),
		}
		infra := &configv1.Infrastructure{}
		if err := c.Get(ctx, client.ObjectKey{Name: "cluster"}, infra); err == nil && infra.Status.PlatformStatus != nil && infra.Status.PlatformStatus.AWS != nil {
			for _, ep := range infra.Status.PlatformStatus.AWS.ServiceEndpoints {
				switch ep.Name {
				case "ec2":
					s.Endpoint = ep.URL
				case "sts":
					s.STSEndpoint = ep.URL
				}
			}
		}
		return s, nil
	}
}

func credentialsSecret(ctx context.Context, c client.Reader, name string) (*corev1.Secret, error) {
	secret := &corev1.Secret{}
	err := c.Get(ctx, client.ObjectKey{Namespace: MachineAPINamespace, Name: name}, secret)
	if apierrors.IsNotFound(err) {
		return nil, bootimage.ErrNoCatalog
	}
	return secret, err
}

// VSphereCredentialsTTL is how long a read of Secret kube-system/vsphere-creds answers for every
// vCenter step: a stream change over 200 vSphere MachineSets costs one GET, not one per step.
const VSphereCredentialsTTL = 30 * time.Second

// VSphereCredentials reads a vCenter's login from Secret kube-system/vsphere-creds, directly: the
// RBAC grants that one Secret, not a watch. A read is reused for VSphereCredentialsTTL; a changed
// Secret is seen at the next read (its resourceVersion is the credentials' Version). Without the
// Secret or the server's keys it answers bootimage.ErrNoCatalog.
func VSphereCredentials(reader client.Reader) func(ctx context.Context, server string) (vspherecloud.Credentials, error) {
	return vsphereCredentials(reader, clock.RealClock{})
}

func vsphereCredentials(reader client.Reader, clk clock.PassiveClock) func(ctx context.Context, server string) (vspherecloud.Credentials, error) {
	var mu sync.Mutex
	var cached *corev1.Secret
	var readAt time.Time
	read := func(ctx context.Context) (*corev1.Secret, error) {
		mu.Lock()
		defer mu.Unlock()
		if cached != nil && clk.Since(readAt) < VSphereCredentialsTTL {
			return cached, nil
		}
		secret := &corev1.Secret{}
		if err := reader.Get(ctx, client.ObjectKey{Namespace: VSphereCredentialsNamespace, Name: VSphereCredentialsSecret}, secret); err != nil {
			cached = nil
			return nil, err
		}
		cached, readAt = secret, clk.Now()
		return secret, nil
	}
	return func(ctx context.Context, server string) (vspherecloud.Credentials, error) {
		secret, err := read(ctx)
		if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
			return vspherecloud.Credentials{}, fmt.Errorf("%w: Secret %s/%s: %v", bootimage.ErrNoCatalog, VSphereCredentialsNamespace, VSphereCredentialsSecret, err)
		}
		if err != nil {
			return vspherecloud.Credentials{}, fmt.Errorf("reading Secret %s/%s: %w", VSphereCredentialsNamespace, VSphereCredentialsSecret, err)
		}
		user, pass := secret.Data[server+".username"], secret.Data[server+".password"]
		if len(user) == 0 || len(pass) == 0 {
			return vspherecloud.Credentials{}, fmt.Errorf("%w: Secret %s/%s has no %s.username and %s.password", bootimage.ErrNoCatalog, VSphereCredentialsNamespace, VSphereCredentialsSecret, server, server)
		}
		return vspherecloud.Credentials{Version: secret.ResourceVersion, Username: string(user), Password: string(pass)}, nil
	}
}
