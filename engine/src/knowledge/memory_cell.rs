//! The memory model a knowledge base predicts with, kept beside the rows it was trained on.

use std::sync::Arc;

use crate::memory::{self, MemoryError, MemoryModel, Row};

/// The memory model a knowledge base predicts with: the bundled one until the host reports a
/// peak, then one retrained on the bundled and the reported peaks. Not saved: it is a function
/// of the reported rows, which are, and is retrained when a snapshot is loaded.
#[derive(Debug, Clone, Default)]
pub(crate) struct MemoryCell(Option<Arc<MemoryModel>>);

impl PartialEq for MemoryCell {
    /// Two cells are equal when trained on the same rows, which their knowledge bases compare.
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl MemoryCell {
    /// A model retrained on the bundled rows and `reported`.
    pub(crate) fn retrained(reported: &[Row]) -> Result<Self, MemoryError> {
        if reported.is_empty() {
            return Ok(Self(None));
        }
        let mut rows: Vec<Row> = memory::bundled().into_iter().map(|l| l.row).collect();
        rows.extend_from_slice(reported);
        Ok(Self(Some(Arc::new(MemoryModel::train(&rows)?))))
    }

    /// The model to predict with: the retrained one, else the bundled one.
    pub(crate) fn model(&self) -> Arc<MemoryModel> {
        self.0.clone().unwrap_or_else(MemoryModel::bundled)
    }
}
