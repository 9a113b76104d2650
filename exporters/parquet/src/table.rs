//! One Parquet file written row by row: typed column builders filled in
//! schema order, handed to the writer as a record batch (one row group)
//! every [`Table::batch`] rows, so memory is bounded by one batch per table.

use std::fs::File;
use std::path::PathBuf;
use std::sync::Arc;

use arrow_array::builder::{BooleanBuilder, Float64Builder, Int64Builder, StringBuilder, TimestampNanosecondBuilder};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;

use crate::{Error, Layout, TableStats};

/// A column's type, as declared in a table's schema.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ty {
    /// int64 (every integer: timestamps and durations in ns, pids, bytes).
    I64,
    F64,
    Str,
    Bool,
    /// timestamp[ns, UTC]: the `wall` column.
    Wall,
}

enum Builder {
    I64(Int64Builder),
    F64(Float64Builder),
    Str(StringBuilder),
    Bool(BooleanBuilder),
    Wall(TimestampNanosecondBuilder),
}

impl Builder {
    fn new(ty: Ty) -> Builder {
        match ty {
            Ty::I64 => Builder::I64(Int64Builder::new()),
            Ty::F64 => Builder::F64(Float64Builder::new()),
            Ty::Str => Builder::Str(StringBuilder::new()),
            Ty::Bool => Builder::Bool(BooleanBuilder::new()),
            Ty::Wall => Builder::Wall(TimestampNanosecondBuilder::new().with_timezone("UTC")),
        }
    }

    fn finish(&mut self) -> ArrayRef {
        match self {
            Builder::I64(b) => Arc::new(b.finish()),
            Builder::F64(b) => Arc::new(b.finish()),
            Builder::Str(b) => Arc::new(b.finish()),
            Builder::Bool(b) => Arc::new(b.finish()),
            Builder::Wall(b) => Arc::new(b.finish()),
        }
    }
}

fn data_type(ty: Ty) -> DataType {
    match ty {
        Ty::I64 => DataType::Int64,
        Ty::F64 => DataType::Float64,
        Ty::Str => DataType::Utf8,
        Ty::Bool => DataType::Boolean,
        Ty::Wall => DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into())),
    }
}

/// A column: name, type, whether it may be null.
pub type Col = (&'static str, Ty, bool);

/// A table being written; see the module docs.
pub struct Table {
    pub name: &'static str,
    pub path: PathBuf,
    schema: SchemaRef,
    cols: Vec<Builder>,
    /// The next column a value goes to.
    at: usize,
    rows: usize,
    pub written: u64,
    batch: usize,
    writer: ArrowWriter<File>,
}

/// u64 values (offsets, sizes, addresses) as int64: those past i64::MAX
/// (only garbage or addresses in the top half) wrap, as in C.
#[inline]
pub fn i(v: u64) -> i64 {
    v as i64
}

impl Table {
    /// Creates table `name`'s file where `at` puts it (and its directory).
    pub fn create(at: &Layout, name: &'static str, cols: &[Col], batch: usize) -> Result<Table, Error> {
        let path = at.path(name);
        let fields: Vec<Field> = cols.iter().map(|&(n, ty, null)| Field::new(n, data_type(ty), null)).collect();
        let schema: SchemaRef = Arc::new(Schema::new(fields));
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| Error::Create(dir.to_path_buf(), e))?;
        }
        let file = File::create(&path).map_err(|e| Error::Create(path.clone(), e))?;
        let props = WriterProperties::builder()
            .set_compression(Compression::ZSTD(ZstdLevel::try_new(3)?))
            .set_max_row_group_size(batch.max(1))
            .set_created_by(format!("mltrace {}", mltrace_log::VERSION))
            .build();
        let writer = ArrowWriter::try_new(file, schema.clone(), Some(props))?;
        Ok(Table {
            name,
            path,
            cols: cols.iter().map(|c| Builder::new(c.1)).collect(),
            schema,
            at: 0,
            rows: 0,
            written: 0,
            batch: batch.max(1),
            writer,
        })
    }

    fn next(&mut self) -> Result<&mut Builder, Error> {
        let at = self.at;
        self.at += 1;
        self.cols.get_mut(at).ok_or(Error::Schema(self.name, at))
    }

    fn mismatch(&self) -> Error {
        Error::Schema(self.name, self.at - 1)
    }

    pub fn i64(&mut self, v: i64) -> Result<&mut Self, Error> {
        self.opt_i64(Some(v))
    }

    pub fn opt_i64(&mut self, v: Option<i64>) -> Result<&mut Self, Error> {
        match self.next()? {
            Builder::I64(b) => b.append_option(v),
            _ => return Err(self.mismatch()),
        }
        Ok(self)
    }

    pub fn f64(&mut self, v: f64) -> Result<&mut Self, Error> {
        match self.next()? {
            Builder::F64(b) => b.append_value(v),
            _ => return Err(self.mismatch()),
        }
        Ok(self)
    }

    pub fn bool(&mut self, v: bool) -> Result<&mut Self, Error> {
        match self.next()? {
            Builder::Bool(b) => b.append_value(v),
            _ => return Err(self.mismatch()),
        }
        Ok(self)
    }

    pub fn wall(&mut self, v: Option<i64>) -> Result<&mut Self, Error> {
        match self.next()? {
            Builder::Wall(b) => b.append_option(v),
            _ => return Err(self.mismatch()),
        }
        Ok(self)
    }

    pub fn str(&mut self, v: &str) -> Result<&mut Self, Error> {
        self.opt_str(Some(v))
    }

    /// Bytes from the log (paths, comms): not always UTF-8.
    pub fn bytes(&mut self, v: &[u8]) -> Result<&mut Self, Error> {
        self.opt_str(Some(&String::from_utf8_lossy(v)))
    }

    /// Bytes, null when empty (a path the log does not know).
    pub fn path(&mut self, v: &[u8]) -> Result<&mut Self, Error> {
        if v.is_empty() {
            self.opt_str(None)
        } else {
            self.bytes(v)
        }
    }

    pub fn opt_str(&mut self, v: Option<&str>) -> Result<&mut Self, Error> {
        match self.next()? {
            Builder::Str(b) => b.append_option(v),
            _ => return Err(self.mismatch()),
        }
        Ok(self)
    }

    /// Ends a row (every column must have had its value); writes a row
    /// group when the batch is full.
    pub fn end_row(&mut self) -> Result<(), Error> {
        if self.at != self.cols.len() {
            return Err(Error::Schema(self.name, self.at));
        }
        self.at = 0;
        self.rows += 1;
        if self.rows >= self.batch {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), Error> {
        if self.rows == 0 {
            return Ok(());
        }
        let arrays: Vec<ArrayRef> = self.cols.iter_mut().map(Builder::finish).collect();
        let batch = RecordBatch::try_new(self.schema.clone(), arrays)?;
        self.writer.write(&batch)?;
        self.writer.flush()?;
        self.written += self.rows as u64;
        self.rows = 0;
        Ok(())
    }

    /// Writes what is left and the file's footer; returns the rows written.
    pub fn close(mut self) -> Result<TableStats, Error> {
        self.flush()?;
        self.writer.close()?;
        Ok(TableStats { name: self.name, path: self.path, rows: self.written })
    }
}
