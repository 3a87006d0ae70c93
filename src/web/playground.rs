//! The web playground: a page served at `/` on the gRPC port, its assets compiled into the
//! binary (no Node, no files to deploy). The page talks to the JSON mapping on the same origin,
//! so it needs no CORS; its Content-Security-Policy lets it reach nothing but this server.

use std::sync::Arc;
use std::task::{Context, Poll};

use axum::http::{HeaderValue, Method, StatusCode, header};
use bytes::Bytes;
use futures::future::{Either, Ready, ready};
use http::{Request, Response};
use http_body_util::{Empty, Full};
use sha2::{Digest, Sha256};
use tonic::body::Body;
use tower::{Layer, Service};

/// Only this origin, and no inline script or style: the page cannot load or send anything
/// elsewhere (fonts, CDNs, analytics), and injected markup cannot run.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; \
     frame-ancestors 'none'";

/// The page's files: (path, content type, content).
const FILES: [(&str, &str, &[u8]); 4] = [
    (
        "/",
        "text/html; charset=utf-8",
        include_bytes!("playground/index.html"),
    ),
    (
        "/playground/app.js",
        "text/javascript; charset=utf-8",
        include_bytes!("playground/app.js"),
    ),
    (
        "/playground/app.css",
        "text/css; charset=utf-8",
        include_bytes!("playground/app.css"),
    ),
    (
        "/playground/icon.svg",
        "image/svg+xml",
        include_bytes!("playground/icon.svg"),
    ),
];

/// Where the page learns how this server is set up.
const CONFIG_PATH: &str = "/playground/config.json";

/// One file as served.
#[derive(Debug)]
struct Asset {
    path: &'static str,
    content_type: &'static str,
    body: Bytes,
    etag: HeaderValue,
}

impl Asset {
    fn new(path: &'static str, content_type: &'static str, body: Bytes) -> Self {
        let digest = Sha256::digest(&body);
        let etag = format!("\"{}\"", hex::encode(&digest[..12]));
        Self {
            path,
            content_type,
            body,
            // Hex in quotes is always a valid header value.
            etag: HeaderValue::from_str(&etag).unwrap_or(HeaderValue::from_static("\"0\"")),
        }
    }
}

/// Serves the playground in front of the rest of the HTTP stack.
#[derive(Clone, Debug)]
pub struct PlaygroundLayer {
    assets: Arc<Vec<Asset>>,
}

impl PlaygroundLayer {
    /// The playground's files; `auth_required` tells the page to ask for an API key.
    pub fn new(auth_required: bool) -> Self {
        let config = serde_json::json!({
            "authRequired": auth_required,
            "version": env!("CARGO_PKG_VERSION"),
        });
        let mut assets: Vec<Asset> = FILES
            .iter()
            .map(|(path, kind, body)| Asset::new(path, kind, Bytes::from_static(body)))
            .collect();
        assets.push(Asset::new(
            CONFIG_PATH,
            "application/json",
            Bytes::from(config.to_string()),
        ));
        Self {
            assets: Arc::new(assets),
        }
    }
}

impl<S> Layer<S> for PlaygroundLayer {
    type Service = Playground<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Playground {
            inner,
            assets: self.assets.clone(),
        }
    }
}

/// The HTTP stack with the playground's files in front; see the [module docs](self).
#[derive(Clone, Debug)]
pub struct Playground<S> {
    inner: S,
    assets: Arc<Vec<Asset>>,
}

impl<S> Playground<S> {
    /// The file a request asks for: GET or HEAD of one of its paths, never a gRPC call.
    fn asset<B>(&self, request: &Request<B>) -> Option<&Asset> {
        if !matches!(*request.method(), Method::GET | Method::HEAD) {
            return None;
        }
        let grpc = request
            .headers()
            .get(header::CONTENT_TYPE)
            .is_some_and(|v| v.as_bytes().starts_with(b"application/grpc"));
        if grpc {
            return None;
        }
        let path = request.uri().path();
        self.assets.iter().find(|a| a.path == path)
    }
}

impl<S> Service<Request<Body>> for Playground<S>
where
    S: Service<Request<Body>, Response = Response<Body>>,
{
    type Response = Response<Body>;
    type Error = S::Error;
    type Future = Either<S::Future, Ready<Result<Response<Body>, S::Error>>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        match self.asset(&request) {
            Some(asset) => Either::Right(ready(Ok(respond(asset, &request)))),
            None => Either::Left(self.inner.call(request)),
        }
    }
}

/// The file, or `304 Not Modified` when the browser's copy is current.
fn respond<B>(asset: &Asset, request: &Request<B>) -> Response<Body> {
    let fresh = request
        .headers()
        .get(header::IF_NONE_MATCH)
        .is_some_and(|tags| {
            tags.as_bytes()
                .split(|b| *b == b',')
                .any(|tag| tag.trim_ascii() == asset.etag.as_bytes())
        });
    let mut response = if fresh || request.method() == Method::HEAD {
        Response::new(Body::new(Empty::<Bytes>::new()))
    } else {
        Response::new(Body::new(Full::new(asset.body.clone())))
    };
    if fresh {
        *response.status_mut() = StatusCode::NOT_MODIFIED;
    }
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(asset.content_type),
    );
    headers.insert(header::ETAG, asset.etag.clone());
    // Revalidated on every load: a new agentd binary serves its own page at once.
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    response
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use http_body_util::BodyExt;
    use tower::ServiceExt;

    use super::*;

    type Reply = Ready<Result<Response<Body>, Infallible>>;
    type Inner = tower::util::ServiceFn<fn(Request<Body>) -> Reply>;

    /// The inner stack answers 418, so a pass-through is visible.
    fn teapot(_: Request<Body>) -> Reply {
        let mut response = Response::new(Body::empty());
        *response.status_mut() = StatusCode::IM_A_TEAPOT;
        ready(Ok(response))
    }

    fn stack(auth: bool) -> Playground<Inner> {
        PlaygroundLayer::new(auth).layer(tower::service_fn(teapot as fn(_) -> _))
    }

    fn get(path: &str) -> http::request::Builder {
        Request::builder().method(Method::GET).uri(path)
    }

    async fn body(response: Response<Body>) -> Bytes {
        match response.into_body().collect().await {
            Ok(collected) => collected.to_bytes(),
            Err(e) => panic!("body: {e}"),
        }
    }

    #[tokio::test]
    async fn serves_the_page_with_its_headers_and_revalidates() {
        let response = stack(false)
            .oneshot(get("/").body(Body::empty()).unwrap())
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let headers = response.headers().clone();
        assert_eq!(headers[header::CONTENT_TYPE], "text/html; charset=utf-8");
        assert!(
            headers[header::CONTENT_SECURITY_POLICY]
                .to_str()
                .unwrap()
                .contains("connect-src 'self'")
        );
        let page = body(response).await;
        assert!(String::from_utf8_lossy(&page).contains("/playground/app.js"));

        let etag = headers[header::ETAG].clone();
        let again = stack(false)
            .oneshot(
                get("/")
                    .header(header::IF_NONE_MATCH, etag)
                    .body(Body::empty())
                    .unwrap(),
            )
            .await
            .unwrap();
        assert_eq!(again.status(), StatusCode::NOT_MODIFIED);
        assert!(body(again).await.is_empty());
    }

    #[tokio::test]
    async fn tells_the_page_whether_keys_are_required() {
        for auth in [false, true] {
            let response = stack(auth)
                .oneshot(get(CONFIG_PATH).body(Body::empty()).unwrap())
                .await
                .unwrap();
            let config: serde_json::Value = serde_json::from_slice(&body(response).await).unwrap();
            assert_eq!(config["authRequired"], auth);
        }
    }

    #[tokio::test]
    async fn everything_else_passes_through() {
        for request in [
            get("/agentd.v1.TaskService/Check").body(Body::empty()),
            Request::builder()
                .method(Method::POST)
                .uri("/")
                .body(Body::empty()),
            get("/")
                .header(header::CONTENT_TYPE, "application/grpc-web")
                .body(Body::empty()),
            get("/playground/missing.js").body(Body::empty()),
        ] {
            let response = stack(false).oneshot(request.unwrap()).await.unwrap();
            assert_eq!(response.status(), StatusCode::IM_A_TEAPOT);
        }
    }
}
