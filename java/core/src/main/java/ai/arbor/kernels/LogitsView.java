package ai.arbor.kernels;

/**
 * A [rows, vocab] matrix of logits in memory the kernels read in place: row {@code r} starts
 * {@code r * rowStride} elements after {@code data.address()}; columns {@code j >= vocabLimit} are
 * embedding padding, absent from every statistic (their gradient is 0).
 *
 * @param data       the memory
 * @param dtype      F32, BF16 or F16
 * @param rows       number of rows (token positions), >= 0
 * @param vocab      columns per row, >= 1
 * @param rowStride  elements between row starts, >= vocab
 * @param vocabLimit real vocabulary size, 1 <= vocabLimit <= vocab
 */
public record LogitsView(MemRef data, DType dtype, long rows, long vocab, long rowStride, long vocabLimit) {

    public LogitsView {
        Check.notNull("data", data);
        Check.notNull("dtype", dtype);
        if (!dtype.isFloating()) throw new IllegalArgumentException("logits dtype must be F32, BF16 or F16, got " + dtype);
        Check.nonNegative("rows", rows);
        Check.positive("vocab", vocab);
        if (rowStride < vocab) throw new IllegalArgumentException("rowStride must be >= vocab (" + vocab + "), got " + rowStride);
        if (vocabLimit < 1 || vocabLimit > vocab)
            throw new IllegalArgumentException("vocabLimit must be in [1, " + vocab + "], got " + vocabLimit);
        Check.fits("logits", data, elements(rows, vocab, rowStride), dtype);
    }

    /** A contiguous [rows, vocab] matrix with no padding columns. */
    public static LogitsView of(MemRef data, DType dtype, long rows, long vocab) {
        return new LogitsView(data, dtype, rows, vocab, vocab, vocab);
    }

    /** This view with another row stride. */
    public LogitsView withRowStride(long stride) {
        return new LogitsView(data, dtype, rows, vocab, stride, vocabLimit);
    }

    /** This view with columns from {@code limit} on treated as padding. */
    public LogitsView withVocabLimit(long limit) {
        return new LogitsView(data, dtype, rows, vocab, rowStride, limit);
    }

    public Device device() {
        return data.device();
    }

    /** Elements spanned by a strided matrix: (rows - 1) * stride + cols, overflow-checked. */
    public static long elements(long rows, long cols, long stride) {
        if (rows == 0) return 0;
        long span = Check.product("(rows - 1) * rowStride", rows - 1, stride);
        if (span > Long.MAX_VALUE - cols) throw new IllegalArgumentException("matrix span " + span + " + " + cols + " overflows");
        return span + cols;
    }
}
