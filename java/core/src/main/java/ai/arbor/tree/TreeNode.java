package ai.arbor.tree;

import ai.arbor.rollout.AgentState;
import ai.arbor.rollout.AgentStep;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

/**
 * A node of a {@link RolloutTree}: one agent step (generation + observation), stored once however many
 * leaves share it. The root holds no step (it is the prompt).
 */
public final class TreeNode {
    private final int id;
    private final TreeNode parent;
    private final int depth;
    private final AgentState state;
    final List<TreeNode> children = new ArrayList<>();
    RolloutTree tree;         // the tree holding this node (null once pruned away)

    TreeNode(int id, TreeNode parent, AgentState state) {
        this.id = id;
        this.parent = parent;
        this.depth = parent == null ? 0 : parent.depth + 1;
        this.state = state;
    }

    /** Id, unique within the tree; the root is 0, others are numbered in creation order. */
    public int id() {
        return id;
    }

    /** Parent, or null for the root. */
    public TreeNode parent() {
        return parent;
    }

    public List<TreeNode> children() {
        return Collections.unmodifiableList(children);
    }

    /** Number of steps from the root (the root is 0). */
    public int depth() {
        return depth;
    }

    public boolean isRoot() {
        return parent == null;
    }

    /** True when the path ended here (answer, limit, failure): a leaf of the tree. */
    public boolean isLeaf() {
        return state.terminated();
    }

    /** This node's step, or null for the root. */
    public AgentStep step() {
        return parent == null ? null : state.lastStep();
    }

    /** The agent state after this node's step — what an expansion from here continues (after forking). */
    public AgentState state() {
        return state;
    }

    /** Node ids from the root's child down to this node. */
    public int[] path() {
        int[] p = new int[depth];
        TreeNode n = this;
        for (int i = depth - 1; i >= 0; i--, n = n.parent) p[i] = n.id;
        return p;
    }

    @Override
    public String toString() {
        return "TreeNode[id=" + id + ", depth=" + depth + ", children=" + children.size() + (isLeaf() ? ", leaf " + state.termination() : "") + "]";
    }
}
