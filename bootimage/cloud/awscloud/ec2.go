package awscloud

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	bootaws "github.com/bootimage-operator/bootimage-operator/bootimage/aws"
	"github.com/bootimage-operator/bootimage-operator/bootimage/cloud"
)

// Cloud API names, the `api` label of the request metrics.
const (
	apiDescribeImages            = "ec2:DescribeImages"
	apiCopyImage                 = "ec2:CopyImage"
	apiAssumeRoleWithWebIdentity = "sts:AssumeRoleWithWebIdentity"
)

// marketplaceOwnerAlias is how DescribeImages names the owner of AWS Marketplace AMIs.
const marketplaceOwnerAlias = "aws-marketplace"

// Cache bounds: an EC2 client per region and credentials version; a DescribeImages answer per
// AMI id or marketplace product and region. Both far above what one cluster needs.
const (
	maxEC2Clients    = 64
	ec2ClientTTL     = time.Hour
	maxImageAnswers  = 1024
	defaultImagesTTL = 10 * time.Minute
	// taggedTTL bounds the answers of tag lookups, which follow a copy's state: short, yet one
	// request serves every object waiting for the copy within it.
	taggedTTL = 2 * time.Second
	// copiesKept bounds the copies remembered by client token.
	copiesKept = 256
)

// Settings is how to reach EC2, as the cluster says: credentials from the
// openshift-machine-api/aws-cloud-credentials Secret and the service endpoints of Infrastructure.
type Settings struct {
	// Version identifies the credentials (the Secret's resourceVersion): clients are rebuilt when it changes.
	Version string
	// SharedConfig is an AWS shared config file (key `credentials` of the Secret): with
	// role_arn and web_identity_token_file it selects STS web identity.
	SharedConfig []byte
	// AccessKeyID and SecretAccessKey are static keys, used when SharedConfig is empty.
	AccessKeyID, SecretAccessKey string
	// Endpoint overrides the EC2 endpoint (Infrastructure status.platformStatus.aws.serviceEndpoints).
	Endpoint string
	// STSEndpoint overrides the STS endpoint for web identity credentials (the same list).
	STSEndpoint string
}

// EC2 looks AMIs up with EC2 DescribeImages. Clients are kept per region and settings, answers
// for TTL, both in bounded caches; callers asking the same question at once share one request.
type EC2 struct {
	// Settings returns the current settings; bootimage.ErrNoCatalog when there are no credentials.
	Settings func(context.Context) (Settings, error)
	// CopySettings returns the settings copies are made with (the operator's own credentials);
	// bootimage.ErrNoCatalog when there are none. Nil: no copies.
	CopySettings func(context.Context) (Settings, error)
	// TTL bounds how stale an answer may be; 10 minutes when zero.
	TTL time.Duration
	// RootCAs, when set, are the only CAs trusted for the endpoints; else the system's, which on
	// a cluster include the injected trusted CA bundle.
	RootCAs *x509.CertPool
	// Metrics, when set, count the requests.
	Metrics cloud.Observer
	// Backoff is how long a failed DescribeImages is remembered, per query, or per region when
	// EC2 throttles or fails.
	Backoff cloud.Backoff

	init    sync.Once
	clients *cloud.Lookups[*ec2.Client]
	answers *cloud.Lookups[[]bootaws.Image]
	tagged  *cloud.Lookups[[]bootaws.Image]
	copies  *cloud.Lookups[string]
}

func (e *EC2) caches() {
	e.init.Do(func() {
		e.clients = cloud.NewLookups[*ec2.Client](maxEC2Clients)
		e.answers = cloud.NewFailingLookups[[]bootaws.Image](maxImageAnswers, e.Backoff)
		e.tagged = cloud.NewFailingLookups[[]bootaws.Image](maxImageAnswers, e.Backoff)
		e.copies = cloud.NewFailingLookups[string](copiesKept, e.Backoff)
	})
}

// AWSImage implements bootimage.Catalog.
func (e *EC2) Image(ctx context.Context, region, id string) (*bootaws.Image, error) {
	images, err := e.describe(ctx, region, "id/"+id, &ec2.DescribeImagesInput{ImageIds: []string{id}, IncludeDeprecated: aws.Bool(true)})
	if err != nil || len(images) == 0 {
		return nil, err
	}
	return &images[0], nil
}

// AWSMarketplaceImages implements bootimage.Catalog, with the query the MCO sends: owner
// aws-marketplace, name matching the product id.
func (e *EC2) MarketplaceImages(ctx context.Context, region, product string) ([]bootaws.Image, error) {
	return e.describe(ctx, region, "marketplace/"+product, &ec2.DescribeImagesInput{
		Owners:  []string{marketplaceOwnerAlias},
		Filters: []ec2types.Filter{{Name: aws.String("name"), Values: []string{"*" + product + "*"}}},
	})
}

// Tagged implements aws.Images: the account's own AMIs carrying every tag, as DescribeImages with
// owner self and a tag:<key> filter each.
func (e *EC2) Tagged(ctx context.Context, region string, tags map[string]string) ([]bootaws.Image, error) {
	in := &ec2.DescribeImagesInput{Owners: []string{"self"}, IncludeDeprecated: aws.Bool(true)}
	keys := slices.Sorted(maps.Keys(tags))
	query := "tagged"
	for _, k := range keys {
		in.Filters = append(in.Filters, ec2types.Filter{Name: aws.String("tag:" + k), Values: []string{tags[k]}})
		query += "/" + k + "=" + tags[k]
	}
	e.caches()
	return e.lookup(ctx, e.tagged, taggedTTL, region, query, in)
}

func (e *EC2) describe(ctx context.Context, region, query string, in *ec2.DescribeImagesInput) ([]bootaws.Image, error) {
	e.caches()
	return e.lookup(ctx, e.answers, cmp.Or(e.TTL, defaultImagesTTL), region, query, in)
}

func (e *EC2) lookup(ctx context.Context, answers *cloud.Lookups[[]bootaws.Image], ttl time.Duration, region, query string, in *ec2.DescribeImagesInput) ([]bootaws.Image, error) {
	settings, err := e.Settings(ctx)
	if err != nil {
		return nil, err
	}
	scope := clientKey(region, settings)
	return answers.Get(ctx, scope+"|"+query, scope, ttl, func(ctx context.Context) ([]bootaws.Image, error) {
		client, err := e.client(ctx, region, settings)
		if err != nil {
			return nil, err
		}
		return describeImages(ctx, observedEC2{client, e.Metrics}, region, in)
	})
}

func describeImages(ctx context.Context, client observedEC2, region string, in *ec2.DescribeImagesInput) ([]bootaws.Image, error) {
	images := []bootaws.Image{}
	pages := ec2.NewDescribeImagesPaginator(client, in)
	for pages.HasMorePages() {
		out, err := pages.NextPage(ctx)
		var apiErr smithy.APIError
		if errors.As(err, &apiErr) && (apiErr.ErrorCode() == "InvalidAMIID.NotFound" || apiErr.ErrorCode() == "InvalidAMIID.Unavailable") {
			break
		}
		if err != nil {
			return nil, failure(apiDescribeImages, region, err)
		}
		for _, img := range out.Images {
			images = append(images, bootaws.Image{
				ImageID: aws.ToString(img.ImageId), OwnerID: aws.ToString(img.OwnerId), Name: aws.ToString(img.Name),
				Description: aws.ToString(img.Description), CreationDate: aws.ToString(img.CreationDate),
				Region: region, State: string(img.State), Tags: tagMap(img.Tags),
			})
			if img.StateReason != nil {
				images[len(images)-1].StateReason = aws.ToString(img.StateReason.Message)
			}
		}
	}
	return images, nil
}

// Copy implements aws.Copier: CopyImage into c.Region, signed for it, encrypted with the account's
// default EBS key and tagged as it is made (image and snapshots), so no copy is ever untagged and
// `openshift-install destroy cluster` finds it. One request per client token in this process; EC2
// answers a repeated token (another process, a restart) with the first copy.
func (e *EC2) Copy(ctx context.Context, c bootaws.Copy) (string, error) {
	if e.CopySettings == nil {
		return "", bootimage.ErrNoCatalog
	}
	settings, err := e.CopySettings(ctx)
	if err != nil {
		return "", err
	}
	e.caches()
	scope := "copy|" + clientKey(c.Region, settings)
	return e.copies.Get(ctx, scope+"|"+c.ClientToken, scope, 24*time.Hour, func(ctx context.Context) (string, error) {
		client, err := e.client(ctx, c.Region, settings)
		if err != nil {
			return "", err
		}
		var tags []ec2types.Tag
		for _, k := range slices.Sorted(maps.Keys(c.Tags)) {
			tags = append(tags, ec2types.Tag{Key: aws.String(k), Value: aws.String(c.Tags[k])})
		}
		start := time.Now()
		out, err := client.CopyImage(ctx, &ec2.CopyImageInput{
			SourceImageId: aws.String(c.SourceAMI), SourceRegion: aws.String(c.SourceRegion),
			Name: aws.String(c.Name), Description: aws.String(c.Description),
			Encrypted: aws.Bool(true), ClientToken: aws.String(c.ClientToken),
			TagSpecifications: []ec2types.TagSpecification{
				{ResourceType: ec2types.ResourceTypeImage, Tags: tags},
				{ResourceType: ec2types.ResourceTypeSnapshot, Tags: tags},
			},
		})
		cloud.Observe(e.Metrics, apiCopyImage, start, err)
		if err != nil {
			return "", failure(apiCopyImage, c.Region, err)
		}
		// The copy exists now: the next decision must see it, not a cached "none".
		e.tagged.Forget(c.Region + "|")
		return aws.ToString(out.ImageId), nil
	})
}

func tagMap(tags []ec2types.Tag) map[string]string {
	if len(tags) == 0 {
		return nil
	}
	m := make(map[string]string, len(tags))
	for _, t := range tags {
		m[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	return m
}

func clientKey(region string, s Settings) string {
	return region + "|" + s.Version + "|" + s.Endpoint + "|" + s.STSEndpoint
}

// client returns the EC2 client of region and s. Building one makes no request: credentials are
// fetched on first use and cached by the client until they expire.
func (e *EC2) client(ctx context.Context, region string, s Settings) (*ec2.Client, error) {
	return e.clients.Get(ctx, clientKey(region, s), "", ec2ClientTTL, func(context.Context) (*ec2.Client, error) {
		httpClient := e.httpClient()
		creds, err := awsCredentials(s, region, httpClient, e.Metrics)
		if err != nil {
			return nil, err
		}
		return ec2.New(ec2.Options{Region: region, Credentials: creds, HTTPClient: httpClient, BaseEndpoint: optional(s.Endpoint)}), nil
	})
}

// httpClient is the SDK's default client, which takes HTTPS_PROXY and NO_PROXY from the
// environment, trusting RootCAs when set.
func (e *EC2) httpClient() aws.HTTPClient {
	client := awshttp.NewBuildableClient()
	if e.RootCAs == nil {
		return client
	}
	return client.WithTransportOptions(func(tr *http.Transport) {
		tr.TLSClientConfig = &tls.Config{RootCAs: e.RootCAs, MinVersion: tls.VersionTLS12}
	})
}

// observedEC2 records the metrics of each DescribeImages call.
type observedEC2 struct {
	*ec2.Client
	metrics cloud.Observer
}

func (c observedEC2) DescribeImages(ctx context.Context, in *ec2.DescribeImagesInput, opts ...func(*ec2.Options)) (*ec2.DescribeImagesOutput, error) {
	start := time.Now()
	out, err := c.Client.DescribeImages(ctx, in, opts...)
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) && (apiErr.ErrorCode() == "InvalidAMIID.NotFound" || apiErr.ErrorCode() == "InvalidAMIID.Unavailable") {
		cloud.Observe(c.metrics, apiDescribeImages, start, nil)
	} else {
		cloud.Observe(c.metrics, apiDescribeImages, start, err)
	}
	return out, err
}

// failure describes err of an AWS API, with the code, message and HTTP status of its answer.
func failure(api, region string, err error) error {
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) {
		return cloud.NewFailure(api, region, err)
	}
	status := 0
	var respErr *awshttp.ResponseError
	if errors.As(err, &respErr) {
		status = respErr.HTTPStatusCode()
	}
	return cloud.NewAPIFailure(api, region, err, status, apiErr.ErrorCode(), apiErr.ErrorMessage())
}
