package ai.arbor.train.task;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;

/**
 * {@code kb}: multi-hop questions over a generated knowledge base of people, cities and organisations,
 * answerable only by searching it (two searches each). The knowledge base is invented from a seed
 * (syllable names), so nothing about it can be known in advance or downloaded.
 *
 * <p>Facts: a person works at an organisation and was born in a city; an organisation is headquartered in
 * a city and was founded by a person. One document per entity states its facts (title = the entity's
 * name). Question templates, each needing the first hop's answer as the second search:
 * <ul>
 *   <li>In which city is the employer of P headquartered? (P → org → city)
 *   <li>Who founded the employer of P? (P → org → founder)
 *   <li>Where was the founder of O born? (O → founder → city)
 * </ul>
 * The held-out split asks about people and organisations that no training question mentions.
 */
public final class KbTask {
    /** A corpus document. */
    public record Doc(String id, String title, String text) {}

    private final List<Doc> corpus = new ArrayList<>();
    private final List<Problem> train = new ArrayList<>();
    private final List<Problem> heldOut = new ArrayList<>();

    public KbTask(long seed, int trainSize, int heldOutSize) {
        Random rnd = new Random(seed);
        Set<String> used = new HashSet<>();
        int nOrgs = Math.max(8, (trainSize + heldOutSize) / 6), nPeople = 4 * nOrgs, nCities = Math.max(6, nOrgs / 2);
        List<String> cities = names(rnd, used, nCities, 2, "");
        List<String> people = new ArrayList<>();
        for (String first : names(rnd, used, nPeople, 2, "")) people.add(first + " " + name(rnd, 2));
        List<String> orgs = names(rnd, used, nOrgs, 2, " Corp");
        Map<String, String> employer = new LinkedHashMap<>(), birthplace = new LinkedHashMap<>();
        Map<String, String> hq = new LinkedHashMap<>(), founder = new LinkedHashMap<>();
        for (String o : orgs) {
            hq.put(o, cities.get(rnd.nextInt(cities.size())));
            founder.put(o, people.get(rnd.nextInt(people.size())));
        }
        for (String p : people) {
            employer.put(p, orgs.get(rnd.nextInt(orgs.size())));
            birthplace.put(p, cities.get(rnd.nextInt(cities.size())));
        }
        for (String p : people)
            corpus.add(new Doc("p" + corpus.size(), p, p + " works at " + employer.get(p) + ". " + p + " was born in " + birthplace.get(p) + "."));
        for (String o : orgs)
            corpus.add(new Doc("o" + corpus.size(), o, o + " is headquartered in " + hq.get(o) + ". " + o + " was founded by " + founder.get(o) + "."));
        for (String c : cities) corpus.add(new Doc("c" + corpus.size(), c, c + " is a city."));

        // held-out questions come from the last quarter of people and organisations, train from the rest
        int pCut = people.size() * 3 / 4, oCut = orgs.size() * 3 / 4;
        List<Problem> pool = new ArrayList<>();
        for (int i = 0; i < people.size(); i++) {
            String p = people.get(i), o = employer.get(p);
            boolean test = i >= pCut;
            pool.add(problem(test, "In which city is the employer of " + p + " headquartered?", hq.get(o), p, o));
            pool.add(problem(test, "Who founded the employer of " + p + "?", founder.get(o), p, o));
        }
        for (int i = 0; i < orgs.size(); i++) {
            String o = orgs.get(i), f = founder.get(o);
            pool.add(problem(i >= oCut, "Where was the founder of " + o + " born?", birthplace.get(f), o, f));
        }
        java.util.Collections.shuffle(pool, rnd);
        for (Problem p : pool) {
            boolean test = p.id().startsWith("test");
            if (test && heldOut.size() < heldOutSize) heldOut.add(renumber(p, "kb-test-" + heldOut.size()));
            else if (!test && train.size() < trainSize) train.add(renumber(p, "kb-train-" + train.size()));
        }
        if (train.size() < trainSize || heldOut.size() < heldOutSize)
            throw new IllegalStateException("knowledge base too small for the requested splits");
    }

    private static Problem problem(boolean test, String question, String answer, String hop1, String hop2) {
        return new Problem(test ? "test" : "train", question, List.of(answer),
                List.of(new Problem.ToolStep("search", hop1), new Problem.ToolStep("search", hop2)));
    }

    private static Problem renumber(Problem p, String id) {
        return new Problem(id, p.question(), p.answers(), p.plan());
    }

    public List<Doc> corpus() {
        return corpus;
    }

    public List<Problem> train() {
        return train;
    }

    public List<Problem> heldOut() {
        return heldOut;
    }

    private static final String[] ONSETS = {"b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "st", "tr"};
    private static final String[] VOWELS = {"a", "e", "i", "o", "u", "ai", "ou"};

    private static String name(Random rnd, int syllables) {
        StringBuilder sb = new StringBuilder();
        for (int s = 0; s < syllables; s++) sb.append(ONSETS[rnd.nextInt(ONSETS.length)]).append(VOWELS[rnd.nextInt(VOWELS.length)]);
        if (rnd.nextBoolean()) sb.append("n");
        return Character.toUpperCase(sb.charAt(0)) + sb.substring(1);
    }

    private static List<String> names(Random rnd, Set<String> used, int n, int syllables, String suffix) {
        List<String> out = new ArrayList<>();
        while (out.size() < n) {
            String s = name(rnd, syllables) + suffix;
            if (used.add(s)) out.add(s);
        }
        return out;
    }
}
