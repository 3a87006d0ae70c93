//! A failed call over HTTP: its gRPC code as an HTTP status (grpc-gateway's table) and the
//! `google.rpc.Status` JSON body (code, message and typed details such as BadRequest).

use axum::http::{HeaderValue, StatusCode, header};
use http::Response;
use prost_reflect::{DescriptorPool, DynamicMessage};
use serde_json::{Value, json};
use tonic::Code;
use tonic::body::Body;

/// The HTTP status a gRPC code maps to.
pub fn http_status(code: Code) -> StatusCode {
    match code {
        Code::Ok => StatusCode::OK,
        Code::Cancelled => StatusCode::from_u16(499).unwrap_or(StatusCode::BAD_REQUEST),
        Code::InvalidArgument | Code::FailedPrecondition | Code::OutOfRange => {
            StatusCode::BAD_REQUEST
        }
        Code::DeadlineExceeded => StatusCode::GATEWAY_TIMEOUT,
        Code::NotFound => StatusCode::NOT_FOUND,
        Code::AlreadyExists | Code::Aborted => StatusCode::CONFLICT,
        Code::PermissionDenied => StatusCode::FORBIDDEN,
        Code::Unauthenticated => StatusCode::UNAUTHORIZED,
        Code::ResourceExhausted => StatusCode::TOO_MANY_REQUESTS,
        Code::Unimplemented => StatusCode::NOT_IMPLEMENTED,
        Code::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        Code::Unknown | Code::Internal | Code::DataLoss => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// `status` as `google.rpc.Status` JSON: its details decoded by type when it has any.
pub fn status_json(pool: &DescriptorPool, status: &tonic::Status) -> Value {
    let plain = || json!({ "code": status.code() as i32, "message": status.message() });
    if status.details().is_empty() {
        return plain();
    }
    let Some(descriptor) = pool.get_message_by_name("google.rpc.Status") else {
        return plain();
    };
    match DynamicMessage::decode(descriptor, status.details()) {
        Ok(decoded) => match serde_json::to_value(&decoded) {
            Ok(Value::Object(mut fields)) => {
                // The details repeat code and message; the headers' copy is authoritative.
                fields.insert("code".into(), json!(status.code() as i32));
                fields.insert("message".into(), json!(status.message()));
                Value::Object(fields)
            }
            _ => plain(),
        },
        Err(_) => plain(),
    }
}

/// A JSON response for a failed call, with the HTTP status of its code.
pub fn error_response(pool: &DescriptorPool, status: &tonic::Status) -> Response<Body> {
    error_response_as(pool, http_status(status.code()), status)
}

/// A JSON response for a failed call, with HTTP status `http`.
pub fn error_response_as(
    pool: &DescriptorPool,
    http: StatusCode,
    status: &tonic::Status,
) -> Response<Body> {
    json_response(http, &status_json(pool, status))
}

/// A JSON response of `status` with `body`.
pub fn json_response(status: StatusCode, body: &Value) -> Response<Body> {
    let mut bytes = serde_json::to_vec(body).unwrap_or_default();
    bytes.push(b'\n');
    let mut response = Response::new(Body::new(http_body_util::Full::new(bytes::Bytes::from(
        bytes,
    ))));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic_types::{ErrorDetails, StatusExt};

    #[test]
    fn codes_map_to_http_statuses() {
        assert_eq!(http_status(Code::InvalidArgument), StatusCode::BAD_REQUEST);
        assert_eq!(http_status(Code::Unauthenticated), StatusCode::UNAUTHORIZED);
        assert_eq!(
            http_status(Code::ResourceExhausted),
            StatusCode::TOO_MANY_REQUESTS
        );
        assert_eq!(http_status(Code::Cancelled).as_u16(), 499);
    }

    #[test]
    fn bad_request_details_are_decoded_by_type() {
        let pool = crate::pb::descriptor_pool().unwrap();
        let status = tonic::Status::with_error_details(
            Code::InvalidArgument,
            "tasks.0.status: Required",
            ErrorDetails::with_bad_request_violation("tasks.0.status", "Required"),
        );
        let json = status_json(pool, &status);
        assert_eq!(json["code"], 3);
        assert_eq!(json["message"], "tasks.0.status: Required");
        assert_eq!(
            json["details"][0]["@type"],
            "type.googleapis.com/google.rpc.BadRequest"
        );
        assert_eq!(
            json["details"][0]["fieldViolations"][0]["field"],
            "tasks.0.status"
        );
        let plain = status_json(pool, &tonic::Status::not_found("no such run"));
        assert_eq!(plain, json!({"code": 5, "message": "no such run"}));
    }
}
