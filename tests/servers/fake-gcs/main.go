// Command fake-gcs runs fake-gcs-server's in-memory GCS emulator on one
// address for the store conformance tests (tests/python/store_servers.py),
// with the two XML-API requests object_store makes that the emulator does not
// serve (fsouza/fake-gcs-server#331) translated onto the emulator's own
// handlers, so that every check (generation preconditions included) is still
// the emulator's:
//
//   - PUT /BUCKET/OBJECT (an XML-API upload, with x-goog-if-generation-match
//     for put-if-absent) becomes the JSON API's media upload
//     POST /upload/storage/v1/b/BUCKET/o?uploadType=media&name=OBJECT&ifGenerationMatch=N,
//     answered as the XML API answers: no body, ETag and x-goog-generation headers.
//   - GET /BUCKET?list-type=2&start-after=KEY (the XML API's list) gets the
//     start-after filter the emulator ignores.
//
// Everything else goes to the emulator unchanged.
package main

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"flag"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"

	"github.com/fsouza/fake-gcs-server/fakestorage"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:4443", "host:port to listen on (http)")
	flag.Parse()
	host, portText, err := net.SplitHostPort(*addr)
	if err != nil {
		log.Fatalf("bad -addr %q: %v", *addr, err)
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil {
		log.Fatalf("bad port in -addr %q: %v", *addr, err)
	}
	server, err := fakestorage.NewServerWithOptions(fakestorage.Options{
		Scheme:      "http",
		Host:        host,
		Port:        uint16(port),
		PublicHost:  *addr,
		ExternalURL: "http://" + *addr,
		NoListener:  true,
	})
	if err != nil {
		log.Fatalf("fake-gcs-server: %v", err)
	}
	emulator := server.HTTPHandler()
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		bucket, object, isObject := split(r.URL.EscapedPath())
		query := r.URL.Query()
		switch {
		case r.Method == http.MethodPut && isObject && xmlUpload(r):
			putObject(emulator, w, r, bucket, object)
		case r.Method == http.MethodGet && !isObject && bucket != "" &&
			query.Get("list-type") == "2" && query.Get("start-after") != "":
			listAfter(emulator, w, r, query.Get("start-after"))
		default:
			emulator.ServeHTTP(w, r)
		}
	})
	log.Printf("fake-gcs listening on http://%s", *addr)
	log.Fatal(http.ListenAndServe(*addr, handler))
}

// split an escaped path /BUCKET[/OBJECT] into the bucket and the (unescaped) object.
func split(escaped string) (bucket, object string, isObject bool) {
	rest := strings.TrimPrefix(escaped, "/")
	if strings.HasPrefix(rest, "storage/") || strings.HasPrefix(rest, "upload/") ||
		strings.HasPrefix(rest, "download/") || strings.HasPrefix(rest, "_internal/") ||
		strings.HasPrefix(rest, "batch/") {
		return "", "", false
	}
	bucket, escapedObject, found := strings.Cut(rest, "/")
	if !found || escapedObject == "" {
		return bucket, "", false
	}
	object, err := url.PathUnescape(escapedObject)
	if err != nil {
		return bucket, "", false
	}
	return bucket, object, true
}

// xmlUpload: a plain XML-API object upload (not a signed URL, a form, a copy
// or a multipart part, which object_store's deltadv paths do not use).
func xmlUpload(r *http.Request) bool {
	q := r.URL.Query()
	return q.Get("X-Goog-Algorithm") == "" && q.Get("uploadType") == "" &&
		q.Get("uploadId") == "" && r.Header.Get("x-goog-copy-source") == ""
}

func putObject(emulator http.Handler, w http.ResponseWriter, r *http.Request, bucket, object string) {
	q := url.Values{"uploadType": {"media"}, "name": {object}}
	if gen := r.Header.Get("x-goog-if-generation-match"); gen != "" {
		q.Set("ifGenerationMatch", gen)
	}
	inner := r.Clone(r.Context())
	inner.Method = http.MethodPost
	inner.URL = &url.URL{Path: "/upload/storage/v1/b/" + bucket + "/o", RawQuery: q.Encode()}
	inner.RequestURI = ""
	inner.Body = r.Body
	rec := httptest.NewRecorder()
	emulator.ServeHTTP(rec, inner)
	if rec.Code != http.StatusOK {
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(rec.Code)
		code := "Error"
		if rec.Code == http.StatusPreconditionFailed {
			code = "PreconditionFailed"
		}
		_, _ = w.Write([]byte(xml.Header + "<Error><Code>" + code + "</Code></Error>"))
		return
	}
	var created struct {
		Etag       string `json:"etag"`
		Generation string `json:"generation"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &created); err != nil || created.Etag == "" {
		http.Error(w, "fake-gcs: unexpected upload response", http.StatusInternalServerError)
		return
	}
	w.Header().Set("ETag", strconv.Quote(created.Etag))
	w.Header().Set("x-goog-generation", created.Generation)
	w.WriteHeader(http.StatusOK)
}

func listAfter(emulator http.Handler, w http.ResponseWriter, r *http.Request, after string) {
	rec := httptest.NewRecorder()
	emulator.ServeHTTP(rec, r)
	if rec.Code != http.StatusOK {
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
		return
	}
	var result fakestorage.ListBucketResult
	if err := xml.Unmarshal(rec.Body.Bytes(), &result); err != nil {
		http.Error(w, "fake-gcs: unexpected list response", http.StatusInternalServerError)
		return
	}
	contents := result.Contents[:0]
	for _, c := range result.Contents {
		if c.Key > after {
			contents = append(contents, c)
		}
	}
	result.Contents = contents
	prefixes := result.CommonPrefixes[:0]
	for _, p := range result.CommonPrefixes {
		if p.Prefix > after {
			prefixes = append(prefixes, p)
		}
	}
	result.CommonPrefixes = prefixes
	result.KeyCount = len(contents)
	raw, err := xml.Marshal(result)
	if err != nil {
		http.Error(w, "fake-gcs: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(append([]byte(xml.Header), bytes.TrimSpace(raw)...))
}
