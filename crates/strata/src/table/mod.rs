//! Block-based sorted tables (being written).
