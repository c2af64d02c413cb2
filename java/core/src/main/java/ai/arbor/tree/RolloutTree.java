package ai.arbor.tree;

import ai.arbor.rollout.AgentState;
import ai.arbor.rollout.Prompt;
import ai.arbor.rollout.Trajectory;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

/**
 * A tree of agent steps for one prompt (Tree-GRPO's unit; ARPO/AEPO build one per prompt). Shared
 * prefixes are stored once: each node holds only its own step, and a leaf's trajectory is the
 * concatenation of the steps on its path.
 *
 * <p>Where a prefix-sharing training path would hook in: today {@link #trajectory} materializes each
 * leaf's full token sequence and the batch carries shared prefixes once per leaf (correct, but the
 * trainer recomputes them). A tree-attention trainer would instead pack the nodes once each, in DFS
 * order, with an attention mask that lets a node see exactly its ancestors — {@link #nodes()},
 * {@link TreeNode#parent()} and {@link TreeNode#step()} are everything it needs.
 *
 * <p>Not thread-safe: strategies mutate a tree only between rounds, on one thread.
 */
public final class RolloutTree {
    private final int index;
    private final Prompt prompt;
    private final TreeNode root;
    private final List<TreeNode> nodes = new ArrayList<>();
    private int generatedNodes;

    /**
     * @param index     this tree's index within its prompt
     * @param rootState the initial agent state (the prompt); expansions from the root fork it
     */
    public RolloutTree(int index, AgentState rootState) {
        if (rootState == null || rootState.stepCount() != 0) throw new IllegalArgumentException("rootState must be an initial state");
        this.index = index;
        this.prompt = rootState.prompt();
        this.root = new TreeNode(0, null, rootState);
        root.tree = this;
        nodes.add(root);
    }

    public int index() {
        return index;
    }

    public Prompt prompt() {
        return prompt;
    }

    public TreeNode root() {
        return root;
    }

    /** All nodes, root first, then in creation order. */
    public List<TreeNode> nodes() {
        return Collections.unmodifiableList(nodes);
    }

    /** Nodes ever added (pruned ones included); the tree's generation work in steps. */
    public int generatedNodes() {
        return generatedNodes;
    }

    /**
     * Adds the node reached by one step from {@code parent}.
     *
     * @param state the state after the step; it must extend {@code parent}'s state by exactly one step
     */
    public TreeNode add(TreeNode parent, AgentState state) {
        if (parent == null || parent.tree != this) throw new IllegalArgumentException("parent is not a node of this tree");
        if (parent.isLeaf()) throw new IllegalArgumentException("cannot extend a leaf: " + parent);
        if (state.stepCount() != parent.state().stepCount() + 1)
            throw new IllegalArgumentException("state has " + state.stepCount() + " steps; a child of depth " + (parent.depth() + 1) + " needs "
                    + (parent.state().stepCount() + 1));
        if (!state.context().startsWith(parent.state().context()))
            throw new IllegalArgumentException("state does not continue parent's context");
        TreeNode n = new TreeNode(generatedNodes + 1, parent, state);
        n.tree = this;
        parent.children.add(n);
        nodes.add(n);
        generatedNodes++;
        return n;
    }

    /** Adds a chain of states, each one step after the previous, under {@code parent}; returns the last node. */
    public TreeNode addChain(TreeNode parent, List<AgentState> states) {
        TreeNode n = parent;
        for (AgentState s : states) n = add(n, s);
        return n;
    }

    /** Leaves (ended paths) in creation order. */
    public List<TreeNode> leaves() {
        List<TreeNode> out = new ArrayList<>();
        for (TreeNode n : nodes) if (!n.isRoot() && n.isLeaf()) out.add(n);
        return out;
    }

    /**
     * Tree-GRPO's expansion candidates: {root} ∪ non-leaf nodes (docs/algorithms.md §4; released code
     * {@code TreeNode.get_expand_node}: the root plus every subtree node that is not a leaf).
     */
    public List<TreeNode> expansionCandidates() {
        List<TreeNode> out = new ArrayList<>();
        for (TreeNode n : nodes) if (n.isRoot() || !n.isLeaf()) out.add(n);
        return out;
    }

    /** Keeps only {@code keep} among the leaves and the nodes on their paths (Tree-GRPO's pruning). */
    public void retainLeaves(List<TreeNode> keep) {
        Set<TreeNode> alive = new HashSet<>();
        for (TreeNode leaf : keep) {
            if (!leaf.isLeaf() || leaf.tree != this) throw new IllegalArgumentException("not a leaf of this tree: " + leaf);
            for (TreeNode n = leaf; n != null; n = n.parent()) alive.add(n);
        }
        for (TreeNode n : nodes) if (!alive.contains(n)) n.tree = null;
        nodes.removeIf(n -> !alive.contains(n));
        for (TreeNode n : nodes) n.children.removeIf(c -> !alive.contains(c));
    }

    /** The trajectory of {@code leaf}: the steps of its path, with this tree's index and the node path. */
    public Trajectory trajectory(TreeNode leaf, int sampleIndex) {
        if (!leaf.isLeaf()) throw new IllegalArgumentException("not a leaf: " + leaf);
        return Trajectory.of(leaf.state(), sampleIndex, index, leaf.path());
    }

    @Override
    public String toString() {
        return "RolloutTree[index=" + index + ", prompt=" + prompt.id() + ", nodes=" + nodes.size() + ", leaves=" + leaves().size() + "]";
    }
}
