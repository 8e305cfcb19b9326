//! The error type of this crate's unit tests: an error of the test's own, or a collective
//! failure, carried over the wire in the crate's JSON form (one type for every test module).

use crate::{CollectiveError, WireError};

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) enum TestError {
    Own(String),
    Collective(CollectiveError),
}

impl From<CollectiveError> for TestError {
    fn from(e: CollectiveError) -> Self {
        TestError::Collective(e)
    }
}

impl WireError for TestError {
    fn to_wire(&self) -> Vec<u8> {
        crate::json_to_wire(self)
    }
    fn from_wire(bytes: &[u8]) -> Self {
        crate::json_from_wire(bytes)
    }
}

impl From<std::io::Error> for TestError {
    fn from(e: std::io::Error) -> Self {
        TestError::Own(e.to_string())
    }
}

impl std::fmt::Display for TestError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self:?}")
    }
}
