package source

import (
	"fmt"
	"io"

	"github.com/tidwall/gjson"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// rawObject is an object as the apiserver sent it, with its resourceVersion read once:
// what client-go's watch (the CRD watch, crds.go) delivers through rawSerializer. The
// resource streams read their watches themselves (watchstream.go), without it.
type rawObject struct {
	data []byte
	rv   string
}

func (o *rawObject) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }
func (o *rawObject) DeepCopyObject() runtime.Object {
	c := *o
	c.data = append([]byte(nil), o.data...)
	return &c
}
func (o *rawObject) GetResourceVersion() string { return o.rv }

// rawSerializer decodes watch event envelopes and objects without building Go values for
// the objects: it is the clients' only codec. Status objects (errors) decode fully so
// client-go's error handling sees a *metav1.Status: a LIST or watch request answered
// with an error becomes a *StatusError (apierrors.IsGone, notServed and classify read it).
type rawSerializer struct{}

func (rawSerializer) Decode(data []byte, _ *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	if ev, ok := into.(*metav1.WatchEvent); ok {
		r := gjson.GetManyBytes(data, "type", "object")
		if !r[1].Exists() {
			return nil, nil, fmt.Errorf("watch event without an object: %.200s", data)
		}
		ev.Type = r[0].Str
		ev.Object = runtime.RawExtension{Raw: []byte(r[1].Raw)}
		return ev, nil, nil
	}
	r := gjson.GetManyBytes(data, "kind", "apiVersion", "metadata.resourceVersion")
	if r[0].Str == "Status" && r[1].Str == "v1" {
		st := &metav1.Status{}
		if err := jsonUnmarshal(data, st); err != nil {
			return nil, nil, err
		}
		return st, nil, nil
	}
	return &rawObject{data: data, rv: r[2].Str}, nil, nil
}

func (rawSerializer) Encode(runtime.Object, io.Writer) error {
	return fmt.Errorf("kube-cdc's source client only reads")
}

func (rawSerializer) Identifier() runtime.Identifier { return "kube-cdc-raw-json" }

// negotiatedSerializer offers only JSON: CRDs have no protobuf, and the sinks want JSON.
func negotiatedSerializer() runtime.NegotiatedSerializer {
	return runtime.NewSimpleNegotiatedSerializer(runtime.SerializerInfo{
		MediaType:        "application/json",
		MediaTypeType:    "application",
		MediaTypeSubType: "json",
		EncodesAsText:    true,
		Serializer:       rawSerializer{},
		StreamSerializer: &runtime.StreamSerializerInfo{
			EncodesAsText: true,
			Serializer:    rawSerializer{},
			Framer:        jsonFramer{},
		},
	})
}
