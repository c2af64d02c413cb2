package ai.arbor.torch.model;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** The two pools are set independently, read back from libtorch and OpenBLAS themselves, and bad counts are refused. */
class CpuThreadsTest {

    @AfterEach
    void oneThreadAgain() {
        CpuThreads.set(1); // the other tests of this JVM run with one thread each
    }

    @Test
    void setsEachPoolToItsOwnCount() {
        CpuThreads.set(2, 1);
        assertEquals(2, CpuThreads.torchThreads(), "libtorch's get_num_threads");
        assertEquals(1, CpuThreads.blasThreads(), "OpenBLAS's blas_get_num_threads");
        CpuThreads.set(1, 2);
        assertEquals(1, CpuThreads.torchThreads());
        assertEquals(2, CpuThreads.blasThreads());
        CpuThreads.set(3);
        assertEquals(3, CpuThreads.torchThreads(), "set(n) sets both");
        assertEquals(3, CpuThreads.blasThreads());
    }

    @Test
    void refusesACountBelowOneNamingIt() {
        CpuThreads.set(1, 1);
        IllegalArgumentException t = assertThrows(IllegalArgumentException.class, () -> CpuThreads.set(0, 1));
        assertTrue(t.getMessage().contains("libtorch") && t.getMessage().contains("got 0"), t.getMessage());
        IllegalArgumentException b = assertThrows(IllegalArgumentException.class, () -> CpuThreads.set(2, -3));
        assertTrue(b.getMessage().contains("OpenBLAS") && b.getMessage().contains("got -3"), b.getMessage());
        assertEquals(1, CpuThreads.torchThreads(), "a refused call changes nothing");
        assertEquals(1, CpuThreads.blasThreads());
    }
}
