package cloud

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
)

// AWSSettings is how to reach EC2, as the cluster says: credentials from the
// openshift-machine-api/aws-cloud-credentials Secret and the ec2 service endpoint of Infrastructure.
type AWSSettings struct {
	// Version identifies the credentials (the Secret's resourceVersion): clients are rebuilt when it changes.
	Version string
	// SharedConfig is an AWS shared config file (key `credentials` of the Secret): with
	// role_arn and web_identity_token_file it selects STS web identity.
	SharedConfig []byte
	// AccessKeyID and SecretAccessKey are static keys, used when SharedConfig is empty.
	AccessKeyID, SecretAccessKey string
	// Endpoint overrides the EC2 endpoint (Infrastructure status.platformStatus.aws.serviceEndpoints).
	Endpoint string
}

// EC2 looks AMIs up with EC2 DescribeImages. Clients are cached per region and settings, results
// for TTL.
type EC2 struct {
	// Settings returns the current settings; bootimage.ErrNoCatalog when there are no credentials.
	Settings func(context.Context) (AWSSettings, error)
	TTL      time.Duration
	// RootCAs, when set, are the CAs trusted for the endpoint (besides AWS_CA_BUNDLE).
	RootCAs *x509.CertPool

	mu      sync.Mutex
	clients map[string]*ec2.Client
	results map[string]cached
}

type cached struct {
	images []bootimage.AWSImage
	at     time.Time
}

// AWSImage implements bootimage.Catalog.
func (e *EC2) AWSImage(ctx context.Context, region, id string) (*bootimage.AWSImage, error) {
	images, err := e.describe(ctx, region, "id/"+id, &ec2.DescribeImagesInput{ImageIds: []string{id}, IncludeDeprecated: aws.Bool(true)})
	if err != nil || len(images) == 0 {
		return nil, err
	}
	return &images[0], nil
}

// AWSImagesByOwner implements bootimage.Catalog.
func (e *EC2) AWSImagesByOwner(ctx context.Context, region, owner, nameContains string) ([]bootimage.AWSImage, error) {
	return e.describe(ctx, region, "owner/"+owner+"/"+nameContains, &ec2.DescribeImagesInput{
		Owners:  []string{owner},
		Filters: []ec2types.Filter{{Name: aws.String("name"), Values: []string{"*" + nameContains + "*"}}},
	})
}

// GCPImage implements bootimage.Catalog: EC2 knows no GCP images.
func (e *EC2) GCPImage(context.Context, string, string) (*bootimage.GCPImage, error) {
	return nil, bootimage.ErrNoCatalog
}

func (e *EC2) describe(ctx context.Context, region, query string, in *ec2.DescribeImagesInput) ([]bootimage.AWSImage, error) {
	settings, err := e.Settings(ctx)
	if err != nil {
		return nil, err
	}
	key := region + "|" + settings.Version + "|" + settings.Endpoint + "|" + query
	e.mu.Lock()
	if c, ok := e.results[key]; ok && time.Since(c.at) < e.TTL {
		e.mu.Unlock()
		return c.images, nil
	}
	e.mu.Unlock()

	client, err := e.client(ctx, region, settings)
	if err != nil {
		return nil, err
	}
	var images []bootimage.AWSImage
	pages := ec2.NewDescribeImagesPaginator(client, in)
	for pages.HasMorePages() {
		out, err := pages.NextPage(ctx)
		var apiErr smithy.APIError
		if errors.As(err, &apiErr) && (apiErr.ErrorCode() == "InvalidAMIID.NotFound" || apiErr.ErrorCode() == "InvalidAMIID.Unavailable") {
			break
		}
		if err != nil {
			return nil, err
		}
		for _, img := range out.Images {
			images = append(images, bootimage.AWSImage{
				ImageID: aws.ToString(img.ImageId), OwnerID: aws.ToString(img.OwnerId), Name: aws.ToString(img.Name),
				Description: aws.ToString(img.Description), CreationDate: aws.ToString(img.CreationDate),
				Region: region, State: string(img.State),
			})
		}
	}
	e.mu.Lock()
	if e.results == nil {
		e.results = map[string]cached{}
	}
	e.results[key] = cached{images: images, at: time.Now()}
	e.mu.Unlock()
	return images, nil
}

func (e *EC2) client(ctx context.Context, region string, s AWSSettings) (*ec2.Client, error) {
	key := region + "|" + s.Version + "|" + s.Endpoint
	e.mu.Lock()
	defer e.mu.Unlock()
	if c, ok := e.clients[key]; ok {
		return c, nil
	}
	opts := []func(*awsconfig.LoadOptions) error{awsconfig.WithRegion(region)}
	if e.RootCAs != nil {
		opts = append(opts, awsconfig.WithHTTPClient(awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
			tr.TLSClientConfig = &tls.Config{RootCAs: e.RootCAs, MinVersion: tls.VersionTLS12}
		})))
	}
	if len(s.SharedConfig) > 0 {
		// STS web identity and other profiles come from a shared config file: let the SDK read it.
		f, err := os.CreateTemp("", "aws-config-*")
		if err != nil {
			return nil, err
		}
		defer os.Remove(f.Name())
		if _, err := f.Write(s.SharedConfig); err != nil {
			return nil, err
		}
		_ = f.Close()
		opts = append(opts, awsconfig.WithSharedConfigFiles([]string{f.Name()}), awsconfig.WithSharedCredentialsFiles([]string{f.Name()}))
	} else {
		opts = append(opts, awsconfig.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(s.AccessKeyID, s.SecretAccessKey, "")))
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("loading AWS configuration: %w", err)
	}
	// Resolve the credentials now, while the shared config file still exists.
	if _, err := cfg.Credentials.Retrieve(ctx); err != nil {
		return nil, fmt.Errorf("AWS credentials: %w", err)
	}
	cfg.Credentials = aws.NewCredentialsCache(cfg.Credentials)
	client := ec2.NewFromConfig(cfg, func(o *ec2.Options) {
		if s.Endpoint != "" {
			o.BaseEndpoint = aws.String(s.Endpoint)
		}
	})
	if e.clients == nil {
		e.clients = map[string]*ec2.Client{}
	}
	e.clients[key] = client
	return client, nil
}
